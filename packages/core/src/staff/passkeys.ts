import { createHash } from 'node:crypto';
import {
  type ControlChangeOutcome,
  IdemError,
  type PasskeyAssertion,
  type PasskeyRegistration,
  type PasskeyView,
} from '@idem/contracts';
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from '@simplewebauthn/server';
import { and, asc, eq, isNotNull, isNull, sql } from 'drizzle-orm';
import type { Executor, Tx } from '../db/connect.ts';
import { approvals, operations, staffPasskeys, staffUsers } from '../db/schema/index.ts';
import { proposeControlChange } from '../proposals/control.ts';
import { activeAdminCount } from '../tenants/governance.ts';
import { isStoredAssertion, storedAssertionRefusal } from './assertion-check.ts';
import { staffActor } from './users.ts';

/**
 * Staff passkeys (WebAuthn; docs/GOVERNANCE.md "Passkeys"). A member registers a passkey from their
 * own device; it is stored inactive and a `passkey_register` control change, approved by other
 * admins, activates it. The trust anchor is the exception: the first passkey of a tenant whose one
 * active admin registers it (single-admin mode) is active at once. The database enforces both
 * (idem_guard_passkey_update). An approver with an active passkey approves a withdrawal only with an
 * assertion whose challenge is approvalChallenge(operation, payload hash, decision), verified here
 * and stored with the decision, so anyone holding the registered public keys can check every
 * approval again (verifyApprovalAssertions) without trusting the database's rows. Proposal
 * decisions carry assertions the same way (./proposal-assertions.ts), over their own challenge.
 */

/** Where assertions are made: the deployment's public origin, and its host as the RP ID. */
export interface WebAuthnRelyingParty {
  /** e.g. https://staff.example.com (IDEM_PUBLIC_URL's origin). */
  origin: string;
  /** The origin's host name. */
  rpId: string;
}

export function relyingPartyOf(origin: string): WebAuthnRelyingParty {
  const url = new URL(origin);
  return { origin: url.origin, rpId: url.hostname };
}

const base64url = (bytes: Uint8Array | Buffer): string => Buffer.from(bytes).toString('base64url');

/**
 * The challenge an approver's passkey signs to decide a withdrawal:
 * SHA-256("idem-approval:" + operationId + ":" + payloadHash + ":" + decision), base64url. Bound to
 * the exact payload the approver was shown and to the decision, so an assertion approves that
 * payload only, and a rejection's assertion approves nothing.
 */
export function approvalChallenge(
  operationId: string,
  payloadHash: string,
  decision: 'approve' | 'reject',
): string {
  return base64url(
    createHash('sha256').update(`idem-approval:${operationId}:${payloadHash}:${decision}`).digest(),
  );
}

/**
 * A registration's challenge: bound to the member and their session's secret (the server passes a
 * value derived from the session cookie), so any server of the deployment recomputes it and a
 * registration made in another session does not verify here.
 */
export function registrationChallenge(userId: string, sessionSecret: string): string {
  return base64url(
    createHash('sha256').update(`idem-passkey-registration:${userId}:${sessionSecret}`).digest(),
  );
}

function viewOf(row: typeof staffPasskeys.$inferSelect): PasskeyView {
  return {
    credentialId: row.credentialId,
    label: row.label,
    createdAt: row.createdAt.toISOString(),
    activatedAt: row.activatedAt?.toISOString() ?? null,
    revokedAt: row.revokedAt?.toISOString() ?? null,
  };
}

/** A member's passkeys, oldest first. */
export async function listPasskeys(db: Executor, tenantId: string, userId: string): Promise<PasskeyView[]> {
  const rows = await db
    .select()
    .from(staffPasskeys)
    .where(and(eq(staffPasskeys.tenantId, tenantId), eq(staffPasskeys.userId, userId)))
    .orderBy(asc(staffPasskeys.createdAt));
  return rows.map(viewOf);
}

async function activePasskeys(db: Executor, tenantId: string, userId: string) {
  return db
    .select()
    .from(staffPasskeys)
    .where(
      and(
        eq(staffPasskeys.tenantId, tenantId),
        eq(staffPasskeys.userId, userId),
        isNotNull(staffPasskeys.activatedAt),
        isNull(staffPasskeys.revokedAt),
      ),
    );
}

/** The options for `startRegistration` in the member's browser. */
export async function passkeyRegistrationOptions(
  db: Executor,
  input: { tenantId: string; userId: string; email: string; rp: WebAuthnRelyingParty; sessionSecret: string },
) {
  const existing = await listPasskeys(db, input.tenantId, input.userId);
  return generateRegistrationOptions({
    rpName: 'Idem staff',
    rpID: input.rp.rpId,
    userName: input.email,
    userID: new TextEncoder().encode(input.userId),
    challenge: Buffer.from(registrationChallenge(input.userId, input.sessionSecret), 'base64url'),
    attestationType: 'none',
    excludeCredentials: existing.map((key) => ({ id: key.credentialId })),
    authenticatorSelection: { residentKey: 'preferred', userVerification: 'required' },
  });
}

/**
 * Verifies a registration made in the member's browser and stores the passkey inactive; then either
 * activates it as the tenant's trust anchor (its one active admin's first passkey, no passkey
 * activated before: APPLIED) or proposes its activation to the other admins (PROPOSED). A member
 * who is not an admin proposes their own passkey; a lone admin's later passkeys need a second admin.
 */
export async function registerPasskey(
  tx: Tx,
  input: {
    tenantId: string;
    userId: string;
    label: string;
    registration: PasskeyRegistration;
    rp: WebAuthnRelyingParty;
    sessionSecret: string;
  },
): Promise<ControlChangeOutcome & { passkey: PasskeyView }> {
  const verification = await verifyRegistrationResponse({
    response: input.registration,
    expectedChallenge: registrationChallenge(input.userId, input.sessionSecret),
    expectedOrigin: input.rp.origin,
    expectedRPID: input.rp.rpId,
    requireUserVerification: true,
  }).catch((error: unknown) => {
    throw new IdemError(
      'VALIDATION',
      `the passkey registration does not verify: ${(error as Error).message}`,
    );
  });
  if (!verification.verified) throw new IdemError('VALIDATION', 'the passkey registration does not verify');
  const { credential } = verification.registrationInfo;
  const inserted = await tx
    .insert(staffPasskeys)
    .values({
      tenantId: input.tenantId,
      credentialId: credential.id,
      userId: input.userId,
      label: input.label,
      publicKey: base64url(credential.publicKey),
      counter: credential.counter,
      transports: credential.transports ?? [],
      activatedAt: null,
    })
    .onConflictDoNothing()
    .returning();
  const row = inserted[0];
  if (!row) throw new IdemError('IDEMPOTENCY_CONFLICT', 'this passkey is already registered');
  if (await isTrustAnchor(tx, input.tenantId, input.userId)) {
    const [activated] = await tx
      .update(staffPasskeys)
      .set({ activatedAt: sql`now()` })
      .where(
        and(eq(staffPasskeys.tenantId, input.tenantId), eq(staffPasskeys.credentialId, row.credentialId)),
      )
      .returning();
    if (!activated) throw new Error('passkey vanished under its insert');
    return { outcome: 'APPLIED', proposalId: null, approvalsRequired: null, passkey: viewOf(activated) };
  }
  const { proposal } = await proposeControlChange(tx, {
    tenantId: input.tenantId,
    actor: staffActor(input.userId),
    change: { control: 'passkey_register', credentialId: row.credentialId, userId: input.userId },
  });
  return {
    outcome: 'PROPOSED',
    proposalId: proposal.proposalId,
    approvalsRequired: proposal.approvalsRequired,
    passkey: viewOf(row),
  };
}

/** Single-admin mode's first passkey: no passkey of the tenant active before, and the member its one admin. */
async function isTrustAnchor(tx: Tx, tenantId: string, userId: string): Promise<boolean> {
  const [anyActive] = await tx
    .select({ id: staffPasskeys.credentialId })
    .from(staffPasskeys)
    .where(and(eq(staffPasskeys.tenantId, tenantId), isNotNull(staffPasskeys.activatedAt)))
    .limit(1);
  if (anyActive) return false;
  const [member] = await tx
    .select({ role: staffUsers.role, disabledAt: staffUsers.disabledAt })
    .from(staffUsers)
    .where(and(eq(staffUsers.tenantId, tenantId), eq(staffUsers.userId, userId)));
  return (
    member?.role === 'admin' && member.disabledAt === null && (await activeAdminCount(tx, tenantId)) === 1
  );
}

/** Applies an approved `passkey_register` change (the governance step): activates the passkey. */
export async function activatePasskey(
  tx: Tx,
  tenantId: string,
  change: { credentialId: string; userId: string },
): Promise<{ credentialId: string; userId: string }> {
  const rows = await tx
    .update(staffPasskeys)
    .set({ activatedAt: sql`now()` })
    .where(
      and(
        eq(staffPasskeys.tenantId, tenantId),
        eq(staffPasskeys.credentialId, change.credentialId),
        eq(staffPasskeys.userId, change.userId),
        isNull(staffPasskeys.activatedAt),
        isNull(staffPasskeys.revokedAt),
      ),
    )
    .returning();
  if (rows.length === 0) throw new IdemError('NOT_FOUND', 'no inactive, unrevoked passkey with that id');
  return { credentialId: change.credentialId, userId: change.userId };
}

/** Revokes one of the member's own passkeys (a tightening: at once). */
export async function revokePasskey(
  tx: Tx,
  tenantId: string,
  input: { userId: string; credentialId: string },
): Promise<PasskeyView> {
  const rows = await tx
    .update(staffPasskeys)
    .set({ revokedAt: sql`now()` })
    .where(
      and(
        eq(staffPasskeys.tenantId, tenantId),
        eq(staffPasskeys.credentialId, input.credentialId),
        eq(staffPasskeys.userId, input.userId),
        isNull(staffPasskeys.revokedAt),
      ),
    )
    .returning();
  const row = rows[0];
  if (!row) throw new IdemError('NOT_FOUND', 'no passkey of yours with that id');
  return viewOf(row);
}

/**
 * The options for `startAuthentication` to decide one withdrawal, or null when the member has no
 * active passkey (the decision then goes without one).
 */
export async function approvalAssertionOptions(
  db: Executor,
  input: {
    tenantId: string;
    userId: string;
    operationId: string;
    payloadHash: string;
    decision: 'approve' | 'reject';
    rp: WebAuthnRelyingParty;
  },
) {
  return assertionOptions(db, input, approvalChallenge(input.operationId, input.payloadHash, input.decision));
}

/**
 * The options for `startAuthentication` to sign `challenge` with one of the member's active
 * passkeys, or null when they have none.
 */
export async function assertionOptions(
  db: Executor,
  input: { tenantId: string; userId: string; rp: WebAuthnRelyingParty },
  challenge: string,
) {
  const keys = await activePasskeys(db, input.tenantId, input.userId);
  if (keys.length === 0) return null;
  return generateAuthenticationOptions({
    rpID: input.rp.rpId,
    challenge: Buffer.from(challenge, 'base64url'),
    allowCredentials: keys.map((key) => ({
      id: key.credentialId,
      transports: key.transports as ('internal' | 'usb' | 'nfc' | 'ble' | 'hybrid')[],
    })),
    userVerification: 'required',
  });
}

/** What a decision row keeps of its assertion: enough for anyone to verify it again. */
export interface StoredAssertion {
  credentialId: string;
  authenticatorData: string;
  clientDataJSON: string;
  signature: string;
  userHandle: string | null;
  counter: number;
}

/** The relying parties a later check accepts: each expected origin, its host the RP ID. */
export interface ExpectedRelyingParties {
  origins: string[];
  rpIds: string[];
}

export function expectedRelyingParties(origins: string[]): ExpectedRelyingParties {
  return {
    origins: origins.map((origin) => new URL(origin).origin),
    rpIds: origins.map((origin) => new URL(origin).hostname),
  };
}

async function verifyAgainst(
  key: typeof staffPasskeys.$inferSelect,
  assertion: PasskeyAssertion,
  challenge: string,
  rp: WebAuthnRelyingParty | ExpectedRelyingParties,
  storedCounter: number,
): Promise<number> {
  const result = await verifyAuthenticationResponse({
    response: assertion,
    expectedChallenge: challenge,
    expectedOrigin: 'origin' in rp ? rp.origin : rp.origins,
    expectedRPID: 'rpId' in rp ? rp.rpId : rp.rpIds,
    credential: {
      id: key.credentialId,
      publicKey: new Uint8Array(Buffer.from(key.publicKey, 'base64url')),
      counter: storedCounter,
    },
    requireUserVerification: true,
  });
  if (!result.verified) throw new Error('the assertion does not verify');
  return result.authenticationInfo.newCounter;
}

/**
 * Whether `staffId` must decide with a passkey: any active passkey of theirs means yes, so a stolen
 * session (or a script) cannot fall back to a decision without their device.
 */
export async function passkeyRequiredFor(tx: Tx, tenantId: string, staffId: string): Promise<boolean> {
  const userId = userIdOf(staffId);
  return userId !== null && (await activePasskeys(tx, tenantId, userId)).length > 0;
}

/** The user id in a staff actor ('staff:<user id>'), or null for any other actor. */
export function userIdOf(staffId: string): string | null {
  const match = /^staff:([0-9a-f-]{36})$/.exec(staffId);
  return match?.[1] ?? null;
}

/**
 * Checks a decision's assertion when it is made: an active passkey of the deciding member, the
 * challenge bound to this operation, payload hash and decision, the deployment's origin and RP ID,
 * user verification, and a signature counter that moved forward (a cloned authenticator). Raises
 * FORBIDDEN otherwise; answers what the approval row stores.
 */
export async function checkDecisionAssertion(
  tx: Tx,
  input: {
    tenantId: string;
    staffId: string;
    operationId: string;
    payloadHash: string;
    decision: 'approve' | 'reject';
    assertion: PasskeyAssertion;
    rp: WebAuthnRelyingParty;
  },
): Promise<StoredAssertion> {
  return checkAssertion(tx, {
    ...input,
    challenge: approvalChallenge(input.operationId, input.payloadHash, input.decision),
    subject: 'withdrawal',
  });
}

/**
 * One decision's assertion over `challenge`, checked as checkDecisionAssertion says, for a
 * withdrawal or a proposal (`subject`, for the refusal's message).
 */
export async function checkAssertion(
  tx: Tx,
  input: {
    tenantId: string;
    staffId: string;
    challenge: string;
    subject: 'withdrawal' | 'proposal';
    assertion: PasskeyAssertion;
    rp: WebAuthnRelyingParty;
  },
): Promise<StoredAssertion> {
  const userId = userIdOf(input.staffId);
  const keys = userId ? await activePasskeys(tx, input.tenantId, userId) : [];
  const key = keys.find((candidate) => candidate.credentialId === input.assertion.id);
  if (!key) throw new IdemError('FORBIDDEN', 'the assertion is not made with an active passkey of yours');
  let counter: number;
  try {
    counter = await verifyAgainst(key, input.assertion, input.challenge, input.rp, key.counter);
  } catch (error) {
    throw new IdemError(
      'FORBIDDEN',
      `the passkey assertion does not verify for this ${input.subject}'s payload hash and decision: ${(error as Error).message}`,
    );
  }
  if (counter > key.counter) {
    // greatest(): two decisions with one passkey at once each move it forward, never back.
    await tx
      .update(staffPasskeys)
      .set({ counter: sql`greatest(${staffPasskeys.counter}, ${counter})` })
      .where(
        and(eq(staffPasskeys.tenantId, input.tenantId), eq(staffPasskeys.credentialId, key.credentialId)),
      );
  }
  return {
    credentialId: key.credentialId,
    authenticatorData: input.assertion.response.authenticatorData,
    clientDataJSON: input.assertion.response.clientDataJSON,
    signature: input.assertion.response.signature,
    userHandle: input.assertion.response.userHandle ?? null,
    counter,
  };
}

export interface ApprovalAssertionCheck {
  operationId: string;
  payloadHash: string;
  approvalsRequired: number | null;
  /** Approvers whose decision carries a valid assertion over this payload hash. */
  verified: string[];
  /** Every other approval bound to the payload hash, with why it does not count. */
  refused: { approver: string; reason: string }[];
  /** Whether the verified approvals reach the required count. */
  sufficient: boolean;
}

/**
 * Checks every approval of a withdrawal again, from the rows alone: for each approval bound to the
 * operation's payload hash, its stored assertion must be signed by a passkey registered to that
 * approver (active, not revoked), over approvalChallenge(operation, payload hash, 'approve'), from
 * one of the expected origins. An approval row written without the approver's device (a forged
 * row, a decision without a passkey) is refused. It is meant for the signer service to call before
 * it signs, with its own read-only role and pinned origins (not wired yet), together with a chain of
 * trust in the passkeys themselves (their activating control changes: verifyProposalAssertions).
 */
export async function verifyApprovalAssertions(
  db: Executor,
  tenantId: string,
  operationId: string,
  expected: { origins: string[] },
): Promise<ApprovalAssertionCheck> {
  const [op] = await db
    .select({ payloadHash: operations.payloadHash, approvalsRequired: operations.approvalsRequired })
    .from(operations)
    .where(and(eq(operations.tenantId, tenantId), eq(operations.operationId, operationId)));
  if (!op) throw new IdemError('NOT_FOUND', 'operation not found');
  const rows = await db
    .select()
    .from(approvals)
    .where(
      and(
        eq(approvals.tenantId, tenantId),
        eq(approvals.operationId, operationId),
        eq(approvals.decision, 'approve'),
        eq(approvals.payloadHash, op.payloadHash),
      ),
    );
  const rp = expectedRelyingParties(expected.origins);
  const challenge = approvalChallenge(operationId, op.payloadHash, 'approve');
  const verified: string[] = [];
  const refused: { approver: string; reason: string }[] = [];
  for (const row of rows) {
    const check = await storedAssertionCheck(db, tenantId, row.approver, row.passkeyAssertion, challenge, rp);
    if ('credentialId' in check) verified.push(row.approver);
    else refused.push({ approver: row.approver, reason: check.reason });
  }
  return {
    operationId,
    payloadHash: op.payloadHash,
    approvalsRequired: op.approvalsRequired,
    verified,
    refused,
    sufficient: op.approvalsRequired !== null && verified.length >= op.approvalsRequired,
  };
}

/**
 * A stored decision's assertion checked again from the rows alone: signed by an active passkey
 * registered to `approver` (and, when the caller keeps its own trust, one it trusts), over
 * `challenge`, for one of the expected relying parties. Answers the passkey that signed it, or why
 * it does not count.
 */
export async function storedAssertionCheck(
  db: Executor,
  tenantId: string,
  approver: string,
  passkeyAssertion: unknown,
  challenge: string,
  rp: ExpectedRelyingParties,
  trusted?: (credentialId: string, userId: string) => boolean,
): Promise<{ credentialId: string } | { reason: string }> {
  if (!isStoredAssertion(passkeyAssertion)) return { reason: 'no passkey assertion' };
  const stored = passkeyAssertion;
  const userId = userIdOf(approver);
  if (!userId) return { reason: 'the approver is not a staff member' };
  const [key] = await db
    .select()
    .from(staffPasskeys)
    .where(
      and(
        eq(staffPasskeys.tenantId, tenantId),
        eq(staffPasskeys.credentialId, stored.credentialId),
        eq(staffPasskeys.userId, userId),
        isNotNull(staffPasskeys.activatedAt),
        isNull(staffPasskeys.revokedAt),
      ),
    );
  if (!key) return { reason: 'not signed with an active passkey of the approver' };
  if (trusted && !trusted(key.credentialId, userId)) return { reason: 'not signed with a trusted passkey' };
  const reason = await storedAssertionRefusal(stored, { challenge, publicKey: key.publicKey, rp });
  return reason === null ? { credentialId: key.credentialId } : { reason };
}
