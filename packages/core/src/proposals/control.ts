import { randomUUID } from 'node:crypto';
import { type ControlChange, controlChangeProposalSchema, IdemError } from '@idem/contracts';
import { and, asc, eq, lte, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { proposals } from '../db/schema/index.ts';
import { notifyAdmins } from '../governance/notify.ts';
import { governanceOf } from '../tenants/governance.ts';
import { activeMembers, counts } from './approvers.ts';
import { countedApprovers, finish } from './decide.ts';
import { PROPOSAL_RULES } from './kinds.ts';
import { type ProposeResult, proposeParsed } from './propose.ts';
import type { ProposalRecord } from './record.ts';

/**
 * Proposes a change that loosens a control, as an active admin. Other admins approve it through
 * the ordinary proposal decisions (decideProposal), as many as the tenant's quorum asks; every
 * admin is told. The way in for every loosening, whichever screen or helper asks for it: a caller
 * classifies its change (tightening applies at once) and, if it loosens, calls this.
 */
export async function proposeControlChange(
  tx: Tx,
  input: { tenantId: string; actor: string; change: ControlChange; idempotencyKey?: string },
): Promise<ProposeResult> {
  const members = await activeMembers(tx, input.tenantId);
  // Any active member proposes the activation of their own passkey; everything else, an admin.
  const ownPasskey =
    input.change.control === 'passkey_register' &&
    input.actor === `staff:${input.change.userId}` &&
    members.has(input.actor);
  if (!ownPasskey && !counts(members, input.actor, 'administer')) {
    throw new IdemError('FORBIDDEN', 'only an active admin proposes a control change');
  }
  const payload = controlChangeProposalSchema.parse({ change: input.change });
  const result = await proposeParsed(tx, {
    tenantId: input.tenantId,
    actor: input.actor,
    request: {
      kind: 'control_change',
      idempotencyKey: input.idempotencyKey ?? `control-${randomUUID()}`,
      payload,
    },
  });
  if (result.outcome === 'CREATED') {
    await notifyAdmins(tx, input.tenantId, {
      topic: 'control_change_proposed',
      proposalId: result.proposal.proposalId,
      message: `${input.actor} proposes to loosen ${describe(input.change)}; it needs ${result.proposal.approvalsRequired} other admin approval(s)`,
    });
  }
  return result;
}

/**
 * The last approval of a control change: APPROVED, taking effect after the tenant's delay (the
 * database refuses an earlier effective time), and every admin is told when.
 */
export async function scheduleControlChange(
  tx: Tx,
  proposal: ProposalRecord,
  approvers: string[],
): Promise<ProposalRecord> {
  const { looseningDelaySeconds } = await governanceOf(tx, proposal.tenantId);
  const rows = await tx
    .update(proposals)
    .set({
      state: 'APPROVED',
      result: { approvedBy: approvers },
      effectiveAt: sql`now() + make_interval(secs => ${looseningDelaySeconds})`,
    })
    .where(
      and(
        eq(proposals.tenantId, proposal.tenantId),
        eq(proposals.proposalId, proposal.proposalId),
        eq(proposals.state, 'PENDING'),
      ),
    )
    .returning();
  const approved = rows[0] as ProposalRecord | undefined;
  if (!approved) throw new Error(`proposal ${proposal.proposalId} changed under its lock`);
  await notifyAdmins(tx, proposal.tenantId, {
    topic: 'control_change_approved',
    proposalId: proposal.proposalId,
    message: `approved by ${approvers.join(', ')}; takes effect at ${approved.effectiveAt?.toISOString()}`,
  });
  return approved;
}

/**
 * The governance executor: applies every approved control change whose time has come, oldest
 * first, each only if its approvals still count (an approver disabled or demoted meanwhile makes
 * it REJECTED), and tells every admin. Also marks open proposals past their expiry EXPIRED. Run by
 * the worker's periodic governance job for every tenant; safe to run from many workers (rows are
 * locked and skipped when another has them).
 */
export async function applyDueControlChanges(
  tx: Tx,
  tenantId: string,
): Promise<{ applied: number; refused: number; expired: number }> {
  const due = (await tx
    .select()
    .from(proposals)
    .where(
      and(
        eq(proposals.tenantId, tenantId),
        eq(proposals.state, 'APPROVED'),
        lte(proposals.effectiveAt, sql`now()`),
      ),
    )
    .orderBy(asc(proposals.effectiveAt))
    .limit(100)
    .for('update', { skipLocked: true })) as ProposalRecord[];
  let applied = 0;
  let refused = 0;
  for (const proposal of due) {
    if (await applyOne(tx, proposal)) applied += 1;
    else refused += 1;
  }
  const expired = await tx
    .update(proposals)
    .set({ state: 'EXPIRED', decidedAt: sql`now()`, result: { expired: true } })
    .where(
      and(
        eq(proposals.tenantId, tenantId),
        eq(proposals.state, 'PENDING'),
        lte(proposals.expiresAt, sql`now()`),
      ),
    )
    .returning({ proposalId: proposals.proposalId });
  return { applied, refused, expired: expired.length };
}

async function applyOne(tx: Tx, proposal: ProposalRecord): Promise<boolean> {
  const approvers = await countedApprovers(tx, proposal);
  const rule = PROPOSAL_RULES[proposal.kind];
  const payload = rule.schema.parse(proposal.payload);
  if (approvers.length < proposal.approvalsRequired) {
    await finish(tx, proposal, 'REJECTED', {
      reason: 'its approvals no longer count (an approver was disabled or lost the permission)',
      approvedBy: approvers,
    });
    await notifyAdmins(tx, proposal.tenantId, {
      topic: 'control_change_refused',
      proposalId: proposal.proposalId,
      message: `not applied: its approvals no longer count (${describe(payload.change)})`,
    });
    return false;
  }
  // A savepoint: a change that cannot apply any more (the last admin demoted meanwhile) is refused
  // alone, and the others still apply.
  try {
    const result = await tx.transaction((sp) =>
      rule.execute(sp, { proposal, payload, approvers, attestation: undefined }),
    );
    await finish(tx, proposal, 'EXECUTED', { ...result, approvedBy: approvers });
    await notifyAdmins(tx, proposal.tenantId, {
      topic: 'control_change_applied',
      proposalId: proposal.proposalId,
      message: `now in force: ${describe(payload.change)}`,
    });
    return true;
  } catch (error) {
    if (!(error instanceof IdemError)) throw error;
    await finish(tx, proposal, 'REJECTED', {
      reason: error.message,
      code: error.code,
      approvedBy: approvers,
    });
    await notifyAdmins(tx, proposal.tenantId, {
      topic: 'control_change_refused',
      proposalId: proposal.proposalId,
      message: `not applied (${error.code}): ${describe(payload.change)}`,
    });
    return false;
  }
}

/** A control change in words, for notices (no personal data: ids, not e-mails). */
export function describe(change: ControlChange): string {
  switch (change.control) {
    case 'risk_rule':
      return `the ${change.rule.assetCode} risk rule (auto-approve ${change.rule.autoApproveMaxMinor}, four-eyes ${change.rule.fourEyesMinMinor}, velocity ${change.rule.velocityMaxPerHour}/h)`;
    case 'governance':
      return `the governance settings (${JSON.stringify(change.settings)})`;
    case 'staff_role':
      return `member ${change.userId}'s role to ${change.role}`;
    case 'staff_enable':
      return `member ${change.userId}, re-enabled`;
    case 'staff_invite':
      return `the team: a new ${change.role} invited`;
    case 'api_key_create':
      return `a new API key ${change.keyId}`;
    case 'api_key_scopes':
      return `API key ${change.keyId}'s scopes to ${change.scopes.join(', ')}`;
    case 'webhook_endpoint_create':
      return `a new outbound webhook endpoint ${change.endpointId}`;
    case 'passkey_register':
      return `a new passkey for member ${change.userId}, which will sign their approvals`;
    case 'freeze_lift':
      return `freeze ${change.freezeId}, lifted: what it holds is signed and sent again`;
    case 'freeze_trip_loosen':
      return `the automatic freeze trips ${change.trip.assetCode === null ? 'of the tenant' : `of ${change.trip.assetCode}`} to ${describeTrips(change.trip)}`;
  }
}

function describeTrips(trip: Extract<ControlChange, { control: 'freeze_trip_loosen' }>['trip']): string {
  const failures =
    trip.failuresMax === null
      ? 'failures trip off'
      : `more than ${trip.failuresMax} UNKNOWN or FAILED_TERMINAL within ${trip.failuresWindowSeconds} s`;
  const outflow =
    trip.outflowShareMaxPercent === null
      ? 'outflow trip off'
      : `outflow above ${trip.outflowShareMaxPercent}% of custody in an hour`;
  return `${failures}; ${outflow}`;
}
