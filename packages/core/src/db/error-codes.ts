/**
 * The `code` of an error and of each error it wraps (drizzle wraps the driver's error, tRPC wraps
 * ours), outermost first: SQLSTATEs such as `IDM03`, driver codes such as `CONNECTION_CLOSED`.
 */
export function errorCodes(error: unknown): string[] {
  const codes: string[] = [];
  for (let cause: unknown = error, depth = 0; cause && depth < 5; depth += 1) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
    cause = (cause as { cause?: unknown }).cause;
  }
  return codes;
}
