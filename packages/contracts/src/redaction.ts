/**
 * Redaction (C23): what never leaves a process in a log line or in stored error text. One place,
 * used by the server's logger and error logs, the workers' logs, and every `last_error` or
 * evidence text written from an error message.
 */

/**
 * Structured log fields that may carry a secret or personal data: API keys, idempotency keys (a
 * holder key in a conflict), destinations, memos, webhook secrets. Their values are censored.
 */
export const REDACTED_LOG_PATHS = [
  'apiKey',
  'idempotencyKey',
  'holderKey',
  'destination',
  'memo',
  'secret',
  '*.apiKey',
  '*.idempotencyKey',
  '*.holderKey',
  '*.destination',
  '*.memo',
  '*.secret',
  '*.*.idempotencyKey',
  '*.*.destination',
  '*.*.memo',
  'req.headers.authorization',
  'req.headers["idempotency-key"]',
  'req.headers["webhook-signature"]',
];

export const REDACTED_MESSAGE_MAX = 500;

/**
 * Free text from an error can quote what it was working on. What is dropped, and why:
 * - SQL parameters: drizzle appends `params: ...` to a failed query, and PostgreSQL quotes the
 *   offending input (`invalid input syntax for type uuid: "..."`, `Key (...)=(...)`);
 * - URL paths, queries and user info: node providers put the account's key in the path
 *   (`https://eth.example/v2/<key>`), and connection strings carry passwords; the host stays;
 * - RPC request bodies (viem quotes them): signed bytes, addresses;
 * - long hex (keys, signed transactions), addresses and Idem API keys anywhere else.
 */
export function scrubMessage(message: string): string {
  return (message.split('\nparams:')[0] ?? '')
    .replace(/^(\s*Request body:).*$/gm, '$1 [redacted]')
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#"'<>`]+)([^\s"'<>`]*)/gi, (_url, scheme, authority, rest) => {
      const host = String(authority).slice(String(authority).lastIndexOf('@') + 1);
      return `${scheme}${host}${rest ? '/[redacted]' : ''}`;
    })
    .replace(/(invalid input (?:syntax|value) for [^:\n]*: )"[^"\n]*"/gi, '$1"[value]"')
    .replace(/(Key \([^)\n]*\)=)\([^\n]*?\)( already exists| is not present| conflicts)/g, '$1([value])$2')
    .replace(/0x[0-9a-fA-F]{41,}/g, '[hex]')
    .replace(/0x[0-9a-fA-F]{40}/g, '[address]')
    .replace(/idem_[0-9a-f]{32}_[A-Za-z0-9_-]+/g, '[api-key]')
    .slice(0, REDACTED_MESSAGE_MAX);
}

/** The scrubbed message of anything thrown, at most `max` characters. */
export function scrubbedError(error: unknown, max = REDACTED_MESSAGE_MAX): string {
  const message = error instanceof Error ? error.message : String(error);
  return scrubMessage(message).slice(0, max);
}

/** Fields a stored record of a request (the staff audit log) never keeps the value of. */
const REDACTED_FIELDS = new Set([
  'apiKey',
  'idempotencyKey',
  'holderKey',
  'destination',
  'memo',
  'secret',
  'password',
  'newPassword',
  'token',
  'code',
  'recoveryCode',
]);

/**
 * A copy of a request's input fit to store: the values of secret or personal fields (at any depth)
 * become `[redacted]`, free text is scrubbed like an error message, and nothing is kept past
 * `maxDepth` levels.
 */
export function redactedCopy(value: unknown, maxDepth = 6): unknown {
  if (maxDepth < 0) return '[truncated]';
  if (typeof value === 'string') return scrubMessage(value);
  if (Array.isArray(value)) return value.slice(0, 100).map((item) => redactedCopy(item, maxDepth - 1));
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>).map(([key, item]) => [
        key,
        REDACTED_FIELDS.has(key) ? '[redacted]' : redactedCopy(item, maxDepth - 1),
      ]),
    );
  }
  return value ?? null;
}
