import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * Paths that may carry a secret or personal data (C23): API keys, idempotency keys (a holder key
 * in a conflict), destinations, memos, webhook secrets. Their values never reach a log line.
 */
export const REDACTED_PATHS = [
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

export function createLogger(options: { level: string; destination?: DestinationStream }): Logger {
  return pino(
    {
      level: options.level,
      base: { service: 'idem' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? pino.destination({ sync: false }),
  );
}

/**
 * Messages of unexpected errors can quote SQL parameters (drizzle appends `params: ...`), and so
 * a key, an address or a memo. Logs keep the statement and drop anything that looks like one.
 */
export function scrubMessage(message: string): string {
  return message
    .split('\nparams:')[0]
    ?.replace(/0x[0-9a-fA-F]{40}/g, '[address]')
    .replace(/idem_[0-9a-f]{32}_[A-Za-z0-9_-]+/g, '[api-key]')
    .slice(0, 500) as string;
}
