/** What was typed is not a command the CLI knows how to run: exit 2 with the usage. */
export class UsageError extends Error {}

type Flags = Record<string, string | boolean | undefined>;

export function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}
