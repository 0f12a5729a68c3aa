import { IdemError, type PasskeyAssertion } from '@idem/contracts';
import { and, eq, ne, sql } from 'drizzle-orm';
import { assertNotCoolingOff } from '../approvals/cooling-off.ts';
import { assertFirstDecision, assertFourEyes } from '../approvals/four-eyes.ts';
import type { Tx } from '../db/connect.ts';
import { proposalDecisions, proposals } from '../db/schema/index.ts';
import type { WebAuthnRelyingParty } from '../staff/passkeys.ts';
import { proposalDecisionAssertion } from '../staff/proposal-assertions.ts';
import { activeMembers, counts } from './approvers.ts';
import { scheduleControlChange } from './control.ts';
import { PROPOSAL_RULES } from './kinds.ts';
import type { ProposalRecord } from './record.ts';

export interface ProposalDecision {
  tenantId: string;
  proposalId: string;
  /** The staff member deciding, e.g. 'staff:<user id>'. */
  staffId: string;
  /** The hash the staff member was shown: payload and evidence. */
  payloadHash: string;
  decision: 'approve' | 'reject';
  reason?: string | undefined;
  /** A fresh answer from the authoritative source, for kinds that need one to execute. */
  attestation?: unknown;
  /**
   * The decider's passkey assertion over proposalChallenge(proposalId, payloadHash, decision).
   * Required, to approve or reject, when the decider has an active passkey (docs/GOVERNANCE.md
   * "Passkeys").
   */
  assertion?: PasskeyAssertion | undefined;
  /** The deployment's origin and RP ID the assertion must have been made for. */
  relyingParty?: WebAuthnRelyingParty | undefined;
}

export interface ProposalDecisionResult {
  /** EXPIRED when the proposal's time was up: nothing was recorded but its expiry. */
  proposal: ProposalRecord;
  approvalsGiven: number;
  approvalsRequired: number;
}

/**
 * Records one staff member's decision on a proposal, four eyes (../approvals/four-eyes.ts): the
 * proposer never decides, each person counts once, and the decision binds the hash shown.
 * Decisions are serialised on the proposal row (FOR UPDATE), so two approvers at the same moment
 * cannot both miss the last approval. The last approval runs the action in this same transaction;
 * if the action is refused (funds gone, evidence not there), everything rolls back, the decision
 * included.
 *
 * Only approvals by members still active and still holding the kind's permission count, when
 * deciding and again in the database as it executes (core/sql/idem_guard_proposal_update.sql).
 * A member with an active passkey decides only with an assertion from it over the proposal's
 * challenge, stored with the decision (../staff/proposal-assertions.ts).
 * A proposal past its expiry is marked EXPIRED and returned as such, so the caller commits the mark
 * and answers EXPIRED (`expiryRefusal`, with runAudited's `refusalOf`); one already marked is refused with EXPIRED at once.
 */
export async function decideProposal(tx: Tx, input: ProposalDecision): Promise<ProposalDecisionResult> {
  const locked = await tx
    .select({ proposal: proposals, expired: sql<boolean>`${proposals.expiresAt} <= now()` })
    .from(proposals)
    .where(and(eq(proposals.tenantId, input.tenantId), eq(proposals.proposalId, input.proposalId)))
    .for('update');
  const row = locked[0];
  if (!row) throw new IdemError('NOT_FOUND', 'no such proposal');
  const proposal = row.proposal as ProposalRecord;
  const required = proposal.approvalsRequired;
  if (proposal.state === 'EXPIRED') throw expiredError(proposal);
  if (proposal.state !== 'PENDING') {
    throw new IdemError('INVALID_TRANSITION', `the proposal is ${proposal.state}, not awaiting approval`);
  }
  if (row.expired) {
    const expired = await finish(tx, proposal, 'EXPIRED', { expiredAt: new Date().toISOString() });
    return { proposal: expired, approvalsGiven: 0, approvalsRequired: required };
  }
  assertFourEyes(
    {
      kind: 'proposal',
      requestedBy: proposal.proposedBy,
      requestedByRole: 'proposer',
      payloadHash: proposal.payloadHash,
    },
    input,
  );
  if (input.decision === 'approve') await assertNotCoolingOff(tx, proposal.tenantId, input.staffId);
  await assertMayDecide(tx, proposal, input.staffId);
  const passkeyAssertion = await proposalDecisionAssertion(tx, proposal, input);
  const inserted = await tx
    .insert(proposalDecisions)
    .values({
      tenantId: proposal.tenantId,
      proposalId: proposal.proposalId,
      approver: input.staffId,
      payloadHash: input.payloadHash,
      decision: input.decision,
      reason: input.reason ?? null,
      passkeyAssertion,
    })
    .onConflictDoNothing()
    .returning();
  assertFirstDecision(inserted, 'proposal');
  const approvers = await countedApprovers(tx, proposal);
  if (input.decision === 'reject') {
    const rejected = await finish(tx, proposal, 'REJECTED', {
      rejectedBy: input.staffId,
      reason: input.reason ?? null,
    });
    return { proposal: rejected, approvalsGiven: approvers.length, approvalsRequired: required };
  }
  if (approvers.length < required) {
    return { proposal, approvalsGiven: approvers.length, approvalsRequired: required };
  }
  const rule = PROPOSAL_RULES[proposal.kind];
  if (rule.delayed) {
    const approved = await scheduleControlChange(tx, proposal, approvers);
    return { proposal: approved, approvalsGiven: approvers.length, approvalsRequired: required };
  }
  const payload = rule.schema.parse(proposal.payload);
  const result = await rule.execute(tx, { proposal, payload, approvers, attestation: input.attestation });
  const executed = await finish(tx, proposal, 'EXECUTED', { ...result, approvedBy: approvers });
  return { proposal: executed, approvalsGiven: approvers.length, approvalsRequired: required };
}

/**
 * Only an active member whose role holds the kind's permission decides (an approver or admin on
 * money, an admin on a control change): anyone else's approval would not count, and their
 * rejection must not end a proposal.
 */
async function assertMayDecide(tx: Tx, proposal: ProposalRecord, staffId: string): Promise<void> {
  const permission = PROPOSAL_RULES[proposal.kind].approverPermission;
  if (!counts(await activeMembers(tx, proposal.tenantId), staffId, permission)) {
    throw new IdemError(
      'FORBIDDEN',
      `only an active member who may ${permission === 'administer' ? 'administer' : 'decide'} decides on this proposal`,
    );
  }
}

/**
 * The EXPIRED refusal a decision comes to when it found its proposal expired, or null: for an
 * audited transaction that must commit the mark and still record the refusal (`refusalOf`).
 */
export function expiryRefusal(result: ProposalDecisionResult): IdemError | null {
  return result.proposal.state === 'EXPIRED' ? expiredError(result.proposal) : null;
}

function expiredError(proposal: ProposalRecord): IdemError {
  return new IdemError(
    'EXPIRED',
    `the proposal expired at ${proposal.expiresAt.toISOString()} without enough approvals; nothing was done`,
  );
}

export async function finish(
  tx: Tx,
  proposal: ProposalRecord,
  state: 'EXECUTED' | 'REJECTED' | 'EXPIRED',
  result: Record<string, unknown>,
): Promise<ProposalRecord> {
  const rows = await tx
    .update(proposals)
    .set({ state, result, decidedAt: sql`now()` })
    .where(
      and(
        eq(proposals.tenantId, proposal.tenantId),
        eq(proposals.proposalId, proposal.proposalId),
        eq(proposals.state, proposal.state),
      ),
    )
    .returning();
  const done = rows[0] as ProposalRecord | undefined;
  // The row is locked by this transaction, so it cannot have moved on.
  if (!done) throw new Error(`proposal ${proposal.proposalId} changed under its lock`);
  return done;
}

/**
 * The distinct approvers whose approvals count now, in the order they approved: bound to the
 * stored hash, never the proposer, each an active member whose role holds the kind's permission.
 */
export async function countedApprovers(tx: Tx, proposal: ProposalRecord): Promise<string[]> {
  const rows = await tx
    .select({ approver: proposalDecisions.approver })
    .from(proposalDecisions)
    .where(
      and(
        eq(proposalDecisions.tenantId, proposal.tenantId),
        eq(proposalDecisions.proposalId, proposal.proposalId),
        eq(proposalDecisions.decision, 'approve'),
        eq(proposalDecisions.payloadHash, proposal.payloadHash),
        ne(proposalDecisions.approver, proposal.proposedBy),
      ),
    )
    .orderBy(proposalDecisions.createdAt);
  const members = await activeMembers(tx, proposal.tenantId);
  const permission = PROPOSAL_RULES[proposal.kind].approverPermission;
  return rows.map((row) => row.approver).filter((approver) => counts(members, approver, permission));
}
