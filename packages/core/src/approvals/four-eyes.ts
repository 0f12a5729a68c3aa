import { IdemError } from '@idem/contracts';

/**
 * Four eyes, the one rule behind both staff decisions: a withdrawal under review and a proposal
 * (I11-F5). What is decided on differs (a withdrawal's requester, a proposal's proposer); the rule
 * does not, so it is written once here and both `decideWithdrawal` and `decideProposal` call it.
 */
export interface FourEyesSubject {
  /** What is decided on, for the refusal's message: 'withdrawal' or 'proposal'. */
  kind: 'withdrawal' | 'proposal';
  /** Who asked for it ('staff:<user id>', 'customer:<account>', 'apikey:<key id>', 'integrator'). */
  requestedBy: string;
  /**
   * Staff who answer for the requester when it is not a person: an API key's minter and last
   * widener. A staff member could otherwise mint a key, submit with it and approve their own
   * request, recorded as the key's.
   */
  answerable?: readonly string[];
  /** The name that person has for this kind: the requester of a withdrawal, the proposer of a proposal. */
  requestedByRole: 'requester' | 'proposer';
  /** The stored payload hash: a decision binds exactly this (C02). */
  payloadHash: string;
}

export interface FourEyesDecision {
  /** The staff member deciding, 'staff:<user id>'. */
  staffId: string;
  /** The hash the staff member was shown. */
  payloadHash: string;
}

/**
 * Refuses a decision four eyes does not allow, before anything is recorded: a hash other than the
 * stored one binds nothing (PAYLOAD_MISMATCH), and the person who asked never decides (C24). That
 * person is signed in and known, so the refusal is FORBIDDEN (403), not UNAUTHORIZED (401, which
 * means "who are you?" and would send a browser back to its sign-in page).
 */
export function assertFourEyes(subject: FourEyesSubject, decision: FourEyesDecision): void {
  if (decision.payloadHash !== subject.payloadHash) {
    throw new IdemError(
      'PAYLOAD_MISMATCH',
      `the hash shown is not the ${subject.kind}'s stored payload hash; nothing was recorded`,
    );
  }
  if (decision.staffId === subject.requestedBy) {
    throw new IdemError(
      'FORBIDDEN',
      `the ${subject.requestedByRole} of a ${subject.kind} cannot decide on it (four eyes)`,
    );
  }
  if (subject.answerable?.includes(decision.staffId)) {
    throw new IdemError(
      'FORBIDDEN',
      `the ${subject.kind} was requested with ${subject.requestedBy}, which this staff member created or last widened: they cannot decide on it (four eyes)`,
    );
  }
}

/**
 * One person counts once: each decision table has a unique (subject, approver) row, so a second
 * decision by the same person inserts nothing and is refused here.
 */
export function assertFirstDecision(inserted: readonly unknown[], subject: FourEyesSubject['kind']): void {
  if (inserted.length === 0) {
    throw new IdemError('IDEMPOTENCY_CONFLICT', `this staff member has already decided on this ${subject}`);
  }
}
