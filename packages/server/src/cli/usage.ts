/** What was typed is not a command the CLI knows how to run: exit 2 with the usage. */
export class UsageError extends Error {}

type Flags = Record<string, string | boolean | undefined>;

export function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

/** What a command returns, as one JSON line (`--json`) or as `key: value` lines. */
export function print(result: Record<string, unknown>, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  for (const [key, value] of Object.entries(result)) {
    process.stdout.write(`${key}: ${typeof value === 'object' ? JSON.stringify(value) : String(value)}\n`);
  }
}
