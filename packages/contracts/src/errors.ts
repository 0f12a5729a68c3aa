/**
 * The closed set of error codes. Every refusal anywhere in Idem carries exactly one of these, so an
 * integrator can branch on `code` and never on a message. Each entry says why the code exists.
 */
export const errorCodes = {
  IDEMPOTENCY_CONFLICT:
    'The key is bound to a different payload, or the withdrawal reference is held by another key. Never retry with a fresh key: find out why two instructions disagree.',
  IN_FLIGHT:
    'The key is claimed and its money-moving outcome is not known yet (UNKNOWN). Retry later with the same key; nothing will be sent twice.',
  POSSIBLE_DUPLICATE:
    'A customer asked for a withdrawal with the same asset, destination and amount as one of the account’s withdrawals still in progress (another device, another tab). Nothing was written. Show the person that withdrawal (duplicateOf); submit again with confirmDuplicateOf naming it only if they confirm they want a second one.',
  INSUFFICIENT_FUNDS:
    'The account lacks available funds. For withdrawals this is stored, and a replay returns it.',
  VALIDATION: 'The input is malformed. Nothing was written.',
  NOT_FOUND: 'No such object for this tenant. Another tenant’s objects are NOT_FOUND too, never FORBIDDEN.',
  UNAUTHORIZED: 'The credential is missing, unknown, revoked or expired.',
  FORBIDDEN:
    'The signed-in staff member’s role does not allow this action, or an API key lacks the scope the call needs (the refusal names it), the staff member asked for the withdrawal or proposal they are deciding on or created or last widened the API key that asked for it (four eyes), a browser mutation lacks its CSRF token or comes from another origin, or a team change would lock out its own admin or leave the team without one. Nothing was written.',
  ORGANISATION_REQUIRED:
    'A staff sign-in without an organisation named an e-mail that belongs to more than one organisation. Sign in again with the organisation’s slug; the answer never says which organisations exist.',
  MFA_REQUIRED:
    'The staff session has not verified a TOTP (or recovery) code yet, and its role or enrolment requires one: enrol (staffAuth.mfaEnrolStart) or verify (staffAuth.mfaVerify) first. Nothing was done.',
  STEP_UP_REQUIRED:
    'Approving, resolving, cancelling and changing configuration need a TOTP code verified within the tenant’s step-up window (5 minutes by default). Verify a fresh code (staffAuth.mfaVerify) and retry. Nothing was done.',
  MFA_KEY_UNAVAILABLE:
    'A stored TOTP secret cannot be opened: the key file (IDEM_MFA_KEY_FILE) is missing, unreadable, not the one the secret was sealed under, or the stored value was changed. Nothing was checked or done; an operator restores the right key file (docs/RUNBOOK.md). Retrying does not help until then.',
  EXPIRED:
    'The proposal was not decided within its tenant’s proposal lifetime (72 hours by default) and is now EXPIRED: nothing it proposed was done. Propose it again if it is still wanted.',
  COOLING_OFF:
    'The staff member joined the team or changed role within the tenant’s cooling-off period (24 hours by default), so their approval does not count yet: the message says from when it will. Nothing was recorded. Rejecting is not held back.',
  INVALID_TRANSITION: 'The state machine does not allow this transition from the operation’s current state.',
  STALE_WRITE:
    'The operation changed since it was read (state, version, or a newer lease generation): another actor won. Re-read; do not retry blindly.',
  PAYLOAD_MISMATCH:
    'The stored payload no longer hashes to the approved hash. Signing is refused: the approval does not cover what would be sent.',
  UNPROVEN:
    'The authoritative source (the chain at the asset’s confirmation depth, or the custodian) does not show what this manual action claims. Nothing was changed: gather the evidence and decide again.',
  PAYLOAD_TOO_LARGE: 'The request body is over the size limit. Nothing was read or written.',
  RATE_LIMITED: 'Too many requests for this credential. Retry after the given delay.',
  SIGNER_UNAVAILABLE:
    'The hot wallet’s signer (an HSM, a KMS, an MPC provider) did not answer within its deadline or answered wrongly. Nothing was signed that could be sent: the withdrawal stays APPROVED and is signed on a later pass.',
  UNAVAILABLE:
    'The database is out of reach for now (a failover in progress, a lost connection, a standby or read-only server). A write in progress may or may not have committed: this server cannot know. Retry with the same key after the given delay; the key tells what happened.',
  INTERNAL: 'An unexpected fault. Nothing is assumed about the outcome of a money-moving step: see UNKNOWN.',
} as const;

export type ErrorCode = keyof typeof errorCodes;
export const errorCodeList = Object.keys(errorCodes) as ErrorCode[];

/** Transport status for each code (RFC 9457 `status`). One table, used by the server and the SDK. */
export const errorStatus: Record<ErrorCode, number> = {
  IDEMPOTENCY_CONFLICT: 409,
  IN_FLIGHT: 409,
  POSSIBLE_DUPLICATE: 409,
  INSUFFICIENT_FUNDS: 422,
  VALIDATION: 400,
  NOT_FOUND: 404,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  ORGANISATION_REQUIRED: 400,
  MFA_REQUIRED: 403,
  STEP_UP_REQUIRED: 403,
  MFA_KEY_UNAVAILABLE: 503,
  EXPIRED: 409,
  COOLING_OFF: 403,
  INVALID_TRANSITION: 409,
  STALE_WRITE: 409,
  PAYLOAD_MISMATCH: 409,
  UNPROVEN: 422,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  SIGNER_UNAVAILABLE: 503,
  UNAVAILABLE: 503,
  INTERNAL: 500,
};

export interface IdemErrorDetails {
  /** On an IDEMPOTENCY_CONFLICT over a withdrawal reference: the key that holds it (C04). */
  holderKey?: string;
  /** On POSSIBLE_DUPLICATE: the account's in-progress withdrawal the new one would repeat (I14-DEVICE). */
  duplicateOf?: { operationId: string; state: string; createdAt: string };
  /** On IN_FLIGHT, RATE_LIMITED and UNAVAILABLE: when a retry makes sense. */
  retryAfterMs?: number;
  /** On VALIDATION: which fields are wrong. */
  issues?: { path: string; message: string }[];
  /** On FORBIDDEN for an API key: the scope the call needs and the key lacks. */
  missingScope?: 'withdraw' | 'customer-sessions' | 'read' | 'webhooks';
  /** On a refusal by the signer service, inside the worker: the service's own code (e.g. FROZEN). */
  signerRefusal?: string;
}

/** The one error type. Messages never include another tenant's data or a secret. */
export class IdemError extends Error {
  override readonly name = 'IdemError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: IdemErrorDetails = {},
  ) {
    super(message);
  }
}

export function isIdemError(error: unknown, code?: ErrorCode): error is IdemError {
  return error instanceof IdemError && (code === undefined || error.code === code);
}
