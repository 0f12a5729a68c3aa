import { createHash } from 'node:crypto';
import { IdemError, type PasskeyAssertion } from '@idem/contracts';
import { and, eq } from 'drizzle-orm';
import type { Executor, Tx } from '../db/connect.ts';
import { proposalDecisions, proposals } from '../db/schema/index.ts';
import type { ProposalRecord } from '../proposals/record.ts';
import { governanceOf } from '../tenants/governance.ts';
import {
  assertionOptions,
  checkAssertion,
  expectedRelyingParties,
  passkeyRequiredFor,
  type StoredAssertion,
  storedAssertionCheck,
  type WebAuthnRelyingParty,
} from './passkeys.ts';

/**
 * Proposal decisions signed with the decider's passkey (docs/GOVERNANCE.md "Passkeys"): what
 * withdrawal approvals do (./passkeys.ts), for proposals. It is what lets a passkey be trusted along a
 * chain rather than because the database says so: a passkey is trusted when pinned at bootstrap, or
 * when the executed `passkey_register` change that activated it carries approvals whose assertions
 * verify against passkeys trusted already (verifyProposalAssertions, with the caller's `trusted`).
 */

/**
 * The challenge a member's passkey signs to decide a proposal:
 * SHA-256("idem-proposal:" + proposalId + ":" + payloadHash + ":" + decision), base64url. Bound to
 * the proposal, the exact payload and evidence shown (its hash) and the decision; its own prefix,
 * so a withdrawal approval's assertion never stands for a proposal decision, nor the reverse.
 */
export function proposalChallenge(
  proposalId: string,
  payloadHash: string,
  decision: 'approve' | 'reject',
): string {
  return createHash('sha256')
    .update(`idem-proposal:${proposalId}:${payloadHash}:${decision}`)
    .digest()
    .toString('base64url');
}

/**
 * The options for `startAuthentication` to decide one proposal, or null when the member has no
 * active passkey (the decision then goes without one).
 */
export async function proposalAssertionOptions(
  db: Executor,
  input: {
    tenantId: string;
    userId: string;
    proposalId: string;
    payloadHash: string;
    decision: 'approve' | 'reject';
    rp: WebAuthnRelyingParty;
  },
) {
  return assertionOptions(db, input, proposalChallenge(input.proposalId, input.payloadHash, input.decision));
}

/**
 * The decision's passkey assertion, checked, or null (decideProposal stores it with the decision).
 * A member with an active passkey decides, approve or reject, only with it: a stolen session, a
 * script, anything that reaches this without their device is refused (FORBIDDEN). A tenant that
 * requires passkeys (tenant_governance.require_passkey_approvals) requires one for every approval,
 * as for withdrawals, but of a control change: those stay decidable without one, or a tenant whose
 * admins have no passkey yet could never activate one, nor turn the requirement off.
 */
export async function proposalDecisionAssertion(
  tx: Tx,
  proposal: ProposalRecord,
  input: {
    staffId: string;
    payloadHash: string;
    decision: 'approve' | 'reject';
    assertion?: PasskeyAssertion | undefined;
    relyingParty?: WebAuthnRelyingParty | undefined;
  },
): Promise<StoredAssertion | null> {
  if (input.assertion) {
    if (!input.relyingParty) throw new Error('a passkey assertion is checked against the deployment origin');
    return checkAssertion(tx, {
      tenantId: proposal.tenantId,
      staffId: input.staffId,
      challenge: proposalChallenge(proposal.proposalId, input.payloadHash, input.decision),
      subject: 'proposal',
      assertion: input.assertion,
      rp: input.relyingParty,
    });
  }
  if (await passkeyRequiredFor(tx, proposal.tenantId, input.staffId)) {
    throw new IdemError(
      'FORBIDDEN',
      'you have an active passkey: decide with it (your device signs the proposal hash and your decision)',
    );
  }
  if (
    input.decision === 'approve' &&
    proposal.kind !== 'control_change' &&
    (await governanceOf(tx, proposal.tenantId)).requirePasskeyApprovals
  ) {
    throw new IdemError(
      'FORBIDDEN',
      'this tenant requires a passkey for every approval: register one (Passkeys) and approve with it',
    );
  }
  return null;
}

export interface ProposalAssertionCheck {
  proposalId: string;
  kind: string;
  /** EXECUTED for a change that took effect: what a chain of trust rests on. */
  state: string;
  payloadHash: string;
  proposedBy: string;
  approvalsRequired: number;
  /** Approvers whose approval carries a valid assertion over this payload hash, and the passkey. */
  verified: { approver: string; credentialId: string }[];
  /** Every other approval bound to the payload hash, with why it does not count. */
  refused: { approver: string; reason: string }[];
}

/**
 * Checks every approval of a proposal again, from the rows alone (a read-only connection will do):
 * for each 'approve' decision bound to the proposal's payload hash, its stored assertion must be
 * signed by a passkey registered to that approver (active, not revoked), over
 * proposalChallenge(proposal, payload hash, 'approve'), from one of the expected origins; and, when
 * the caller passes `trusted`, by a passkey it trusts (its chain of trust: pinned anchors, then
 * passkeys whose activating change verified). The proposer's own approval never counts. A decision
 * row written without the approver's device (a forged row, a decision without a passkey) is
 * refused with its reason. Whether the verified approvers are enough, and may decide this kind, is
 * the caller's to judge: `approvalsRequired` is what the proposal asked.
 */
export async function verifyProposalAssertions(
  db: Executor,
  tenantId: string,
  proposalId: string,
  expected: { origins: string[] },
  trusted?: (credentialId: string, userId: string) => boolean,
): Promise<ProposalAssertionCheck> {
  const [proposal] = await db
    .select()
    .from(proposals)
    .where(and(eq(proposals.tenantId, tenantId), eq(proposals.proposalId, proposalId)));
  if (!proposal) throw new IdemError('NOT_FOUND', 'no such proposal');
  const rows = await db
    .select()
    .from(proposalDecisions)
    .where(
      and(
        eq(proposalDecisions.tenantId, tenantId),
        eq(proposalDecisions.proposalId, proposalId),
        eq(proposalDecisions.decision, 'approve'),
        eq(proposalDecisions.payloadHash, proposal.payloadHash),
      ),
    )
    .orderBy(proposalDecisions.createdAt);
  const rp = expectedRelyingParties(expected.origins);
  const challenge = proposalChallenge(proposalId, proposal.payloadHash, 'approve');
  const verified: ProposalAssertionCheck['verified'] = [];
  const refused: ProposalAssertionCheck['refused'] = [];
  for (const row of rows) {
    if (row.approver === proposal.proposedBy) {
      refused.push({ approver: row.approver, reason: 'the proposer never approves their own proposal' });
      continue;
    }
    const check = await storedAssertionCheck(
      db,
      tenantId,
      row.approver,
      row.passkeyAssertion,
      challenge,
      rp,
      trusted,
    );
    if ('credentialId' in check) verified.push({ approver: row.approver, credentialId: check.credentialId });
    else refused.push({ approver: row.approver, reason: check.reason });
  }
  return {
    proposalId,
    kind: proposal.kind,
    state: proposal.state,
    payloadHash: proposal.payloadHash,
    proposedBy: proposal.proposedBy,
    approvalsRequired: proposal.approvalsRequired,
    verified,
    refused,
  };
}
