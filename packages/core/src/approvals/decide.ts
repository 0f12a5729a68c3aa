import { IdemError, type PasskeyAssertion } from '@idem/contracts';
import { and, count, eq, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { approvals, operations } from '../db/schema/index.ts';
import type { Operation } from '../operations/operation-record.ts';
import { reviewWithdrawal } from '../risk/review.ts';
import {
  checkDecisionAssertion,
  passkeyRequiredFor,
  type StoredAssertion,
  type WebAuthnRelyingParty,
} from '../staff/passkeys.ts';
import { transition } from '../state-machine/transition.ts';
import { activeAdminCount, governanceOf } from '../tenants/governance.ts';
import { assertNotCoolingOff } from './cooling-off.ts';
import { assertFirstDecision, assertFourEyes } from './four-eyes.ts';
import { answerableFor, requesterOf } from './requester.ts';

export { requesterOf };

export interface Decision {
  tenantId: string;
  operationId: string;
  /** The staff member deciding, e.g. 'staff:<user id>'. */
  staffId: string;
  /** The payload hash the staff member was shown and approves (C02). */
  payloadHash: string;
  decision: 'approve' | 'reject';
  reason?: string;
  /**
   * The approver's passkey assertion over approvalChallenge(operationId, payloadHash, decision).
   * Required to approve when the approver has an active passkey (docs/GOVERNANCE.md "Passkeys").
   */
  assertion?: PasskeyAssertion;
  /** The deployment's origin and RP ID the assertion must have been made for. */
  relyingParty?: WebAuthnRelyingParty;
}

export interface DecisionResult {
  operation: Operation;
  approvalsGiven: number;
  approvalsRequired: number;
}

/**
 * Records one staff decision on a withdrawal under review. Approval is bound to the payload hash
 * shown to the approver: a hash that is not the stored one is refused (C02, C24). The requester
 * can never approve their own withdrawal, nor can the staff who minted or last widened the API key
 * that requested it, and one person counts once (four eyes, ./four-eyes.ts).
 * The last required approval moves the withdrawal to APPROVED; a rejection moves it to REJECTED and
 * releases the hold. Both go through the same transition function as everything else.
 *
 * Decisions on one withdrawal are serialised by a lock on its row, taken first (I11-F2): under
 * READ COMMITTED two approvers deciding at once would each count only their own approval and
 * neither would complete it. A withdrawal not yet risk-reviewed is reviewed here first, in the
 * same transaction (I11-F1), so a decision always counts toward what the review requires; if the
 * review approves it without a person, the decision is refused and nothing is recorded.
 */
export async function decideWithdrawal(tx: Tx, input: Decision): Promise<DecisionResult> {
  let op = await lockOperation(tx, input.tenantId, input.operationId);
  if (op.kind !== 'withdrawal') throw new IdemError('INVALID_TRANSITION', 'only withdrawals are approved');
  if (op.state === 'REQUESTED' && op.approvalsRequired === null) {
    op = await reviewWithdrawal(tx, op);
    if (op.state !== 'REQUESTED') {
      throw new IdemError(
        'INVALID_TRANSITION',
        `the risk review finds the withdrawal ${op.state} without a person; it is not awaiting approval and nothing was recorded`,
      );
    }
  }
  if (op.state !== 'REQUESTED') {
    throw new IdemError('INVALID_TRANSITION', `the withdrawal is ${op.state}, not awaiting approval`);
  }
  const required = op.approvalsRequired;
  if (required === null || required < 1) {
    throw new Error(`withdrawal ${op.operationId} awaits approval without a reviewed approval count`);
  }
  const requester = await requesterOf(tx, op);
  assertFourEyes(
    {
      kind: 'withdrawal',
      requestedBy: requester,
      answerable: await answerableFor(tx, op, requester),
      requestedByRole: 'requester',
      payloadHash: op.payloadHash,
    },
    input,
  );
  if (input.decision === 'approve') await assertNotCoolingOff(tx, op.tenantId, input.staffId);
  await assertSingleAdminMayApprove(tx, op, input.decision);
  const passkeyAssertion = await decisionAssertion(tx, op, input);
  const inserted = await tx
    .insert(approvals)
    .values({
      tenantId: op.tenantId,
      operationId: op.operationId,
      approver: input.staffId,
      payloadHash: input.payloadHash,
      decision: input.decision,
      reason: input.reason ?? null,
      passkeyAssertion,
    })
    .onConflictDoNothing()
    .returning();
  assertFirstDecision(inserted, 'withdrawal');
  const given = await approvalsGiven(tx, op);
  if (input.decision === 'reject') {
    const rejected = await transition(tx, op, 'REJECTED', {
      actor: input.staffId,
      reason: input.reason ?? 'rejected at review',
      evidence: { payloadHash: input.payloadHash },
      set: { rejectionCode: 'REJECTED_AT_REVIEW' },
    });
    return { operation: rejected, approvalsGiven: given, approvalsRequired: required };
  }
  if (given < required) return { operation: op, approvalsGiven: given, approvalsRequired: required };
  const approved = await transition(tx, op, 'APPROVED', {
    actor: input.staffId,
    reason: required > 1 ? `four-eyes approval complete (${given} of ${required})` : 'approved at review',
    evidence: { payloadHash: input.payloadHash, approvals: given },
    // Asserted again in the write itself: never APPROVED on fewer approvals than the review requires.
    where: [sql`${operations.approvalsRequired} is not null and ${operations.approvalsRequired} <= ${given}`],
  });
  return { operation: approved, approvalsGiven: given, approvalsRequired: required };
}

/**
 * The decision's passkey assertion, checked (./staff/passkeys.ts checkDecisionAssertion), or null.
 * An approver with an active passkey approves only with it: a stolen session, or anything else
 * that reaches this call without the approver's device, is refused (FORBIDDEN); in a tenant that
 * requires passkeys (tenant_governance.require_passkey_approvals) every approver does. A rejection only
 * lowers risk and goes through without one; with one, it is checked and kept too.
 */
async function decisionAssertion(tx: Tx, op: Operation, input: Decision): Promise<StoredAssertion | null> {
  if (input.assertion) {
    if (!input.relyingParty) throw new Error('a passkey assertion is checked against the deployment origin');
    return checkDecisionAssertion(tx, {
      tenantId: op.tenantId,
      staffId: input.staffId,
      operationId: op.operationId,
      payloadHash: input.payloadHash,
      decision: input.decision,
      assertion: input.assertion,
      rp: input.relyingParty,
    });
  }
  if (input.decision !== 'approve') return null;
  if (await passkeyRequiredFor(tx, op.tenantId, input.staffId)) {
    throw new IdemError(
      'FORBIDDEN',
      'you have an active passkey: approve with it (your device signs the payload hash you approve)',
    );
  }
  if ((await governanceOf(tx, op.tenantId)).requirePasskeyApprovals) {
    throw new IdemError(
      'FORBIDDEN',
      'this tenant requires a passkey for every approval: register one (Passkeys) and approve with it',
    );
  }
  return null;
}

/**
 * Single-admin mode (docs/GOVERNANCE.md): a tenant created with one admin on purpose approves
 * nothing above its auto-approve limit while it has fewer than two active admins, so one person
 * cannot move what the rules say needs a person. Rejecting stays possible.
 */
async function assertSingleAdminMayApprove(tx: Tx, op: Operation, decision: 'approve' | 'reject') {
  const flags = Array.isArray(op.riskFlags) ? (op.riskFlags as string[]) : [];
  if (decision !== 'approve' || !flags.includes('amount_above_auto_approve')) return;
  const { singleAdmin } = await governanceOf(tx, op.tenantId);
  if (singleAdmin && (await activeAdminCount(tx, op.tenantId)) < 2) {
    throw new IdemError(
      'FORBIDDEN',
      'single-admin mode: a withdrawal above the auto-approve limit cannot be approved until a second admin exists',
    );
  }
}

async function approvalsGiven(tx: Tx, op: Operation): Promise<number> {
  const rows = await tx
    .select({ n: count() })
    .from(approvals)
    .where(
      and(
        eq(approvals.tenantId, op.tenantId),
        eq(approvals.operationId, op.operationId),
        eq(approvals.decision, 'approve'),
        eq(approvals.payloadHash, op.payloadHash),
      ),
    );
  return rows[0]?.n ?? 0;
}

/** The withdrawal's row, locked until the deciding transaction ends, as committed now. */
async function lockOperation(tx: Tx, tenantId: string, operationId: string): Promise<Operation> {
  const rows = await tx
    .select()
    .from(operations)
    .where(and(eq(operations.tenantId, tenantId), eq(operations.operationId, operationId)))
    .for('update');
  const found = rows[0] as Operation | undefined;
  if (!found) throw new IdemError('NOT_FOUND', 'operation not found');
  return found;
}
