import { IdemError } from '@idem/contracts';
import { and, count, eq, gt, ne, sql } from 'drizzle-orm';
import { staffInitiationOf } from '../approvals/requester.ts';
import type { Database, Tx } from '../db/connect.ts';
import { operations, riskPolicies, tenants } from '../db/schema/index.ts';
import { withTenantAsConnection } from '../db/tenant-scope.ts';
import type { Operation } from '../operations/operation-record.ts';
import { recordTransition, transition } from '../state-machine/transition.ts';

export type RiskFlag =
  | 'amount_above_auto_approve'
  | 'velocity'
  | 'similar_recent_withdrawal'
  | 'four_eyes_amount'
  | 'staff_initiated';

export interface RiskAssessment {
  flags: RiskFlag[];
  approvalsRequired: number;
}

/**
 * Reviews a new withdrawal against its tenant's rules for the asset. A match only sends it to
 * staff review: nothing is ever merged or dropped because it looks like another one (C06). With no
 * policy row for the asset, every withdrawal needs one staff approval. A withdrawal a staff member
 * asked for is never approved by the system: another staff member approves it, two when the
 * requester did not act at the account holder's request (I11-F3).
 */
export async function assessRisk(tx: Tx, op: Operation): Promise<RiskAssessment> {
  const assessed = await assessRules(tx, op);
  const staff = await staffInitiationOf(tx, op);
  if (!staff) return assessed;
  return {
    flags: [...assessed.flags, 'staff_initiated'],
    approvalsRequired: Math.max(assessed.approvalsRequired, staff.onBehalfOf ? 1 : 2),
  };
}

/**
 * Whether an amount needs two approvers besides the person who asked: at or above the asset's
 * four-eyes threshold. The one threshold for withdrawals and for proposals (adjustments, manual
 * credits, resolutions, cancels, fee-cap raises), so a person cannot move through a proposal what
 * they could not move through a withdrawal. A debit counts by its size.
 */
export function reachesFourEyes(amountMinor: bigint, policy: { fourEyesMinMinor: string }): boolean {
  const size = amountMinor < 0n ? -amountMinor : amountMinor;
  return size >= BigInt(policy.fourEyesMinMinor);
}

/**
 * The assessment a withdrawal not stored yet would get (the dry run): the same rules, counting it
 * in the hour's velocity as its own review will, since it is then one of the account's rows.
 * Requested by an integrator, never by staff, so the staff-initiated rule does not apply.
 */
export function assessPendingWithdrawal(
  tx: Tx,
  op: Pick<
    Operation,
    'tenantId' | 'operationId' | 'assetCode' | 'amountMinor' | 'accountRef' | 'destination'
  >,
): Promise<RiskAssessment> {
  return assessRules(tx, op, { pending: true });
}

async function assessRules(
  tx: Tx,
  op: Pick<
    Operation,
    'tenantId' | 'operationId' | 'assetCode' | 'amountMinor' | 'accountRef' | 'destination'
  >,
  { pending }: { pending: boolean } = { pending: false },
): Promise<RiskAssessment> {
  const policies = await tx
    .select()
    .from(riskPolicies)
    .where(and(eq(riskPolicies.tenantId, op.tenantId), eq(riskPolicies.assetCode, op.assetCode)));
  const policy = policies[0];
  const amount = BigInt(op.amountMinor);
  const flags: RiskFlag[] = [];
  if (!policy) return { flags: ['amount_above_auto_approve'], approvalsRequired: 1 };

  if (amount > BigInt(policy.autoApproveMaxMinor)) flags.push('amount_above_auto_approve');
  const fourEyes = reachesFourEyes(amount, policy);
  if (fourEyes) flags.push('four_eyes_amount');

  const recent = await tx
    .select({ n: count() })
    .from(operations)
    .where(
      and(
        eq(operations.tenantId, op.tenantId),
        eq(operations.kind, 'withdrawal'),
        eq(operations.accountRef, op.accountRef),
        gt(operations.createdAt, sql`now() - interval '1 hour'`),
      ),
    );
  if ((recent[0]?.n ?? 0) + (pending ? 1 : 0) > policy.velocityMaxPerHour) flags.push('velocity');

  if (op.destination !== null) {
    const similar = await tx
      .select({ n: count() })
      .from(operations)
      .where(
        and(
          eq(operations.tenantId, op.tenantId),
          eq(operations.kind, 'withdrawal'),
          ne(operations.operationId, op.operationId),
          eq(operations.destination, op.destination),
          eq(operations.amountMinor, op.amountMinor),
          gt(operations.createdAt, sql`now() - make_interval(mins => ${policy.similarWindowMinutes})`),
        ),
      );
    if ((similar[0]?.n ?? 0) > 0) flags.push('similar_recent_withdrawal');
  }
  const approvalsRequired = fourEyes ? 2 : flags.length > 0 ? 1 : 0;
  return { flags, approvalsRequired };
}

/**
 * Applies the assessment to a REQUESTED withdrawal: records the flags and the approvals needed,
 * and approves it as the system when nothing needs a person. Idempotent: a withdrawal already
 * reviewed (or no longer REQUESTED) is left alone.
 */
export async function reviewWithdrawal(tx: Tx, op: Operation): Promise<Operation> {
  if (op.kind !== 'withdrawal' || op.state !== 'REQUESTED' || op.approvalsRequired !== null) return op;
  const assessment = await assessRisk(tx, op);
  const updated = await tx
    .update(operations)
    .set({
      riskFlags: assessment.flags,
      approvalsRequired: assessment.approvalsRequired,
      version: sql`${operations.version} + 1`,
      updatedAt: sql`now()`,
    })
    .where(
      and(
        eq(operations.tenantId, op.tenantId),
        eq(operations.operationId, op.operationId),
        eq(operations.state, 'REQUESTED'),
        eq(operations.version, op.version),
      ),
    )
    .returning();
  const reviewed = updated[0] as Operation | undefined;
  if (!reviewed) return op;
  await recordTransition(tx, reviewed, 'REQUESTED', {
    actor: 'system:risk',
    reason:
      assessment.approvalsRequired === 0
        ? 'risk review: no flags'
        : `risk review: ${assessment.flags.join(', ')}; ${assessment.approvalsRequired} approval(s) needed`,
    evidence: { flags: assessment.flags, approvalsRequired: assessment.approvalsRequired },
    notify: false,
  });
  if (assessment.approvalsRequired > 0) return reviewed;
  return transition(tx, reviewed, 'APPROVED', {
    actor: 'system:risk',
    reason: 'within auto-approval limits, no risk flags',
  });
}

/** One asset's rules as setRiskPolicy writes them; the velocity and the window default to 10 and 60. */
export interface RiskPolicyInput {
  tenantId: string;
  assetCode: string;
  autoApproveMaxMinor: string;
  fourEyesMinMinor: string;
  velocityMaxPerHour?: number;
  similarWindowMinutes?: number;
  /** Who changes the rules: a staff id, 'cli:<user>', or the provisioning path's name. */
  actor: string;
}

/**
 * Sets a tenant's rules for one asset, as `actor`. A real change bumps the tenant's policy version
 * and records the rules before and after in `policy_history`, in this transaction: the database
 * does both (trigger `risk_policies_versioned`, core/sql/idem_record_policy_change.sql), attributing
 * the change to the transaction-local `app.actor` set here. Setting the rules already in force
 * writes nothing and leaves the version alone. In the application role's transaction the database
 * takes a tightening (and a first rule that auto-approves nothing) at once, and a loosening only as
 * the apply step of an approved, due control change for exactly these rules
 * (core/sql/idem_guard_risk_policy_write.sql): the staff screens go through changeRiskRule, the
 * deployment's own tools through setRiskPolicyAsOperator.
 */
export async function setRiskPolicy(
  tx: Tx,
  input: RiskPolicyInput,
): Promise<{ changed: boolean; policyVersion: number }> {
  const actor = input.actor.trim();
  if (actor === '') throw new IdemError('VALIDATION', 'a policy change must name who makes it');
  const values = {
    tenantId: input.tenantId,
    assetCode: input.assetCode,
    autoApproveMaxMinor: input.autoApproveMaxMinor,
    fourEyesMinMinor: input.fourEyesMinMinor,
    velocityMaxPerHour: input.velocityMaxPerHour ?? 10,
    similarWindowMinutes: input.similarWindowMinutes ?? 60,
  };
  await tx.execute(sql`select set_config('app.actor', ${actor}, true)`);
  const written = await tx
    .insert(riskPolicies)
    .values(values)
    .onConflictDoUpdate({
      target: [riskPolicies.tenantId, riskPolicies.assetCode],
      set: { ...values, updatedAt: sql`now()` },
      // Only a real change is written: an unchanged row keeps its version and its updated_at.
      setWhere: sql`(${riskPolicies.autoApproveMaxMinor}, ${riskPolicies.fourEyesMinMinor},
        ${riskPolicies.velocityMaxPerHour}, ${riskPolicies.similarWindowMinutes})
        is distinct from (excluded.auto_approve_max_minor, excluded.four_eyes_min_minor,
        excluded.velocity_max_per_hour, excluded.similar_window_minutes)`,
    })
    .returning({ assetCode: riskPolicies.assetCode });
  // The actor named this change only: a later write in the transaction must name its own.
  await tx.execute(sql`select set_config('app.actor', '', true)`);
  const [tenant] = await tx
    .select({ policyVersion: tenants.policyVersion })
    .from(tenants)
    .where(eq(tenants.tenantId, input.tenantId));
  if (!tenant) throw new IdemError('NOT_FOUND', 'tenant not found');
  return { changed: written.length > 0, policyVersion: tenant.policyVersion };
}

/**
 * An asset's rules set by the deployment's own tools, not by the application: the CLI's `idem
 * risk-policy set`, the embedded demo's and the chaos suite's provisioning, test fixtures. It runs
 * as the connection's own role (`withTenantAsConnection`), since the database takes any rule,
 * looser ones included, only from the tables' owner (idem_guard_risk_policy_write). Connected as
 * the application's login, a loosening is refused (insufficient_privilege) and a tightening applies.
 */
export async function setRiskPolicyAsOperator(
  db: Database,
  input: RiskPolicyInput,
): Promise<{ changed: boolean; policyVersion: number }> {
  return withTenantAsConnection(db, input.tenantId, (tx) => setRiskPolicy(tx, input));
}
