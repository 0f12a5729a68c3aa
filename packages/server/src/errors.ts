import { type ErrorCode, errorStatus, IdemError, type Problem, problemType } from '@idem/contracts';
import { errorCodes } from '@idem/core';
import { TRPCError } from '@trpc/server';
import type { TRPC_ERROR_CODE_KEY } from '@trpc/server/rpc';

/** Titles of the problem documents: short, stable, never the specific message. */
const titles: Record<ErrorCode, string> = {
  IDEMPOTENCY_CONFLICT: 'Idempotency conflict',
  IN_FLIGHT: 'Operation in flight',
  POSSIBLE_DUPLICATE: 'Possible duplicate withdrawal',
  INSUFFICIENT_FUNDS: 'Insufficient funds',
  VALIDATION: 'Invalid request',
  NOT_FOUND: 'Not found',
  UNAUTHORIZED: 'Unauthorized',
  FORBIDDEN: 'Forbidden',
  ORGANISATION_REQUIRED: 'Organisation required',
  MFA_REQUIRED: 'Multi-factor authentication required',
  STEP_UP_REQUIRED: 'Fresh authentication code required',
  MFA_KEY_UNAVAILABLE: 'TOTP key file unavailable',
  EXPIRED: 'Proposal expired',
  COOLING_OFF: 'Approver still cooling off',
  INVALID_TRANSITION: 'Invalid transition',
  STALE_WRITE: 'Stale write',
  PAYLOAD_MISMATCH: 'Payload mismatch',
  UNPROVEN: 'Not proven by the authoritative source',
  PAYLOAD_TOO_LARGE: 'Payload too large',
  RATE_LIMITED: 'Rate limited',
  SIGNER_UNAVAILABLE: 'Signer unavailable',
  UNAVAILABLE: 'Database unavailable',
  INTERNAL: 'Internal error',
};

/** Errors tRPC raises itself (bad JSON, oversize bodies, unknown procedures), in our codes. */
const fromTrpcCode: Partial<Record<TRPC_ERROR_CODE_KEY, ErrorCode>> = {
  PARSE_ERROR: 'VALIDATION',
  BAD_REQUEST: 'VALIDATION',
  UNSUPPORTED_MEDIA_TYPE: 'VALIDATION',
  METHOD_NOT_SUPPORTED: 'VALIDATION',
  UNPROCESSABLE_CONTENT: 'VALIDATION',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  NOT_FOUND: 'NOT_FOUND',
  UNAUTHORIZED: 'UNAUTHORIZED',
  FORBIDDEN: 'NOT_FOUND',
  TOO_MANY_REQUESTS: 'RATE_LIMITED',
};

/**
 * How long a client should wait before retrying after losing the database: about a third of a
 * pg_auto_failover promotion on the drill (5 s), so a client's few retries span one failover.
 */
export const DATABASE_UNAVAILABLE_RETRY_MS = 2_000;

/**
 * The answer while the database is out of reach. It must not claim an outcome: a statement whose
 * connection broke may have committed (the reply is what got lost), so it says "retry with the
 * same key", which is correct whether or not the write landed.
 */
function databaseUnavailable(): IdemError {
  return new IdemError(
    'UNAVAILABLE',
    'the database is unavailable for now (failover or lost connection); the outcome of this request is not known here: retry with the same key',
    { retryAfterMs: DATABASE_UNAVAILABLE_RETRY_MS },
  );
}

/** The one IdemError any failure is seen as at the edge. */
export function asIdemError(error: unknown): IdemError {
  if (error instanceof IdemError) return error;
  if (isDatabaseUnavailable(error)) return databaseUnavailable();
  if (error instanceof TRPCError) {
    if (error.cause instanceof IdemError) return error.cause;
    const code = fromTrpcCode[error.code] ?? 'INTERNAL';
    if (code === 'VALIDATION') {
      const issues = issuesOf(error.cause);
      const message = issues?.map((issue) => `${issue.path || 'input'}: ${issue.message}`).join('; ');
      return new IdemError('VALIDATION', message || safeTrpcMessage(error), issues ? { issues } : {});
    }
    if (code === 'INTERNAL') return new IdemError('INTERNAL', 'an unexpected error occurred');
    return new IdemError(code, safeTrpcMessage(error));
  }
  return new IdemError('INTERNAL', 'an unexpected error occurred');
}

export function toProblem(error: IdemError, requestId: string): Problem {
  const problem: Problem = {
    code: error.code,
    type: problemType(error.code),
    title: titles[error.code],
    status: errorStatus[error.code],
    detail: error.message,
    requestId,
  };
  if (error.details.holderKey !== undefined) problem.holderKey = error.details.holderKey;
  if (error.details.duplicateOf !== undefined) problem.duplicateOf = error.details.duplicateOf;
  if (error.details.retryAfterMs !== undefined) problem.retryAfterMs = error.details.retryAfterMs;
  if (error.details.issues !== undefined) problem.issues = error.details.issues;
  if (error.details.missingScope !== undefined) problem.missingScope = error.details.missingScope;
  return problem;
}

function issuesOf(cause: unknown): { path: string; message: string }[] | undefined {
  if (typeof cause !== 'object' || cause === null || !('issues' in cause)) return undefined;
  const issues = (cause as { issues: unknown }).issues;
  if (!Array.isArray(issues)) return undefined;
  return issues.slice(0, 20).map((issue: { path?: unknown; message?: unknown }) => ({
    path: Array.isArray(issue.path)
      ? issue.path
          .map((part) => (typeof part === 'object' && part ? String(part.key) : String(part)))
          .join('.')
      : '',
    message: typeof issue.message === 'string' ? issue.message : 'invalid value',
  }));
}

/** tRPC's own messages for transport errors are fixed strings; anything else is not echoed. */
function safeTrpcMessage(error: TRPCError): string {
  return error.message.length <= 200 ? error.message : error.code;
}

/**
 * Database faults that mean "try again later", not "the request was wrong": connection exceptions
 * (class 08), an administrator or crash shutdown (57P01-57P03), too many connections (53300), a
 * standby or read-only server (25006, a client still on a demoted primary), and postgres.js's
 * CONNECT_TIMEOUT / CONNECTION_* codes and socket errors.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  return errorCodes(error).some(
    (code) =>
      /^08/.test(code) ||
      [
        '57P01',
        '57P02',
        '57P03',
        '53300',
        '25006',
        'ECONNREFUSED',
        'ECONNRESET',
        'EPIPE',
        'ETIMEDOUT',
        'CONNECTION_CLOSED',
      ].includes(code) ||
      code.startsWith('CONNECT') ||
      code === 'CONNECTION_ENDED' ||
      code === 'CONNECTION_DESTROYED',
  );
}

/** The JSON-RPC error code tRPC clients see, consistent with the HTTP status of our code. */
export function trpcCodeFor(code: ErrorCode): TRPC_ERROR_CODE_KEY {
  switch (errorStatus[code]) {
    case 400:
      return 'BAD_REQUEST';
    case 401:
      return 'UNAUTHORIZED';
    case 403:
      return 'FORBIDDEN';
    case 404:
      return 'NOT_FOUND';
    case 409:
      return 'CONFLICT';
    case 413:
      return 'PAYLOAD_TOO_LARGE';
    case 422:
      return 'UNPROCESSABLE_CONTENT';
    case 429:
      return 'TOO_MANY_REQUESTS';
    default:
      return 'INTERNAL_SERVER_ERROR';
  }
}
