import { type ErrorCode, errorStatus, type Problem } from '@idem/contracts';

/**
 * A refusal from the Idem API: one stable `code` from the closed set, and the RFC 9457 problem
 * with the request id to quote to support. Branch on `code` or the `is…` flags, never on a message.
 */
export class IdemApiError extends Error {
  override readonly name = 'IdemApiError';
  readonly code: ErrorCode;
  readonly status: number;

  constructor(readonly problem: Problem) {
    super(`${problem.code}: ${problem.detail}`);
    this.code = problem.code as ErrorCode;
    this.status = problem.status;
  }

  /** The key is bound to another payload, or the withdrawal id is held by another key (`problem.holderKey`). Never retry with a fresh key. */
  get isIdempotencyConflict(): boolean {
    return this.code === 'IDEMPOTENCY_CONFLICT';
  }
  /** The outcome is not known yet; the SDK already retried with the same key for as long as allowed. */
  get isInFlight(): boolean {
    return this.code === 'IN_FLIGHT';
  }
  get isInsufficientFunds(): boolean {
    return this.code === 'INSUFFICIENT_FUNDS';
  }
  get isValidation(): boolean {
    return this.code === 'VALIDATION';
  }
  get isNotFound(): boolean {
    return this.code === 'NOT_FOUND';
  }
  /** The API key is missing, unknown, revoked or past its expiry. */
  get isUnauthorized(): boolean {
    return this.code === 'UNAUTHORIZED';
  }
  /** The API key lacks the scope this call needs (`missingScope` names it). Never retried. */
  get isForbidden(): boolean {
    return this.code === 'FORBIDDEN';
  }
  /** On FORBIDDEN for an API key: the scope to add to the key (staff API keys screen) or to use a key with. */
  get missingScope(): string | undefined {
    return this.problem.missingScope;
  }
  /**
   * The database was out of reach (a failover, a lost connection): the SDK already retried with the
   * same key for as long as allowed. A submission's outcome is unknown, not failed: call again with
   * the same key.
   */
  get isUnavailable(): boolean {
    return this.code === 'UNAVAILABLE';
  }
  /** Whether the SDK treats this refusal as transient (it retries these itself, within its limits). */
  get isRetryable(): boolean {
    return isRetryableCode(this.code, this.status);
  }
}

/** The refusals the SDK retries with the same key: transient, never a verdict on the request. */
export function isRetryableCode(code: string, status = errorStatus[code as ErrorCode] ?? 500): boolean {
  return code === 'IN_FLIGHT' || code === 'RATE_LIMITED' || code === 'UNAVAILABLE' || status >= 500;
}

/**
 * No answer from the API after every allowed attempt: a network error, a timeout or a response
 * that was not Idem's. The outcome of a submission is unknown; calling again with the SAME key is
 * always safe and tells you what happened.
 */
export class IdemTransportError extends Error {
  override readonly name = 'IdemTransportError';
  constructor(
    message: string,
    readonly attempts: number,
    override readonly cause?: unknown,
  ) {
    super(message);
  }
}
