import { REDACTED_LOG_PATHS } from '@idem/contracts';
import pino, { type DestinationStream, type Logger } from 'pino';

/** Structured fields that may carry a secret are censored (C23; the list is in contracts' redaction). */
export function createLogger(options: { level: string; destination?: DestinationStream }): Logger {
  return pino(
    {
      level: options.level,
      base: { service: 'idem' },
      redact: { paths: REDACTED_LOG_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? pino.destination({ sync: false }),
  );
}
