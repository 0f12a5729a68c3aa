import {
  IdemError,
  type PolicyChangeView,
  type RiskRuleView,
  type SetRiskRuleInput,
  setRiskRuleInputSchema,
} from '@idem/contracts';
import { and, asc, eq } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { assets, riskPolicies, staffUsers } from '../db/schema/index.ts';
import { staffActor } from '../staff/users.ts';
import { policyHistory } from './policy-history.ts';
import { setRiskPolicy } from './review.ts';

/** The tenant's risk rules per asset with each asset's decimals, and every asset of the tenant. */
export async function listRiskRules(
  tx: Tx,
  tenantId: string,
): Promise<{ rules: RiskRuleView[]; assets: { code: string; decimals: number }[] }> {
  const tenantAssets = await tx
    .select({ code: assets.code, decimals: assets.decimals })
    .from(assets)
    .where(eq(assets.tenantId, tenantId))
    .orderBy(asc(assets.code));
  const decimalsOf = new Map(tenantAssets.map((a) => [a.code, a.decimals]));
  const rows = await tx
    .select()
    .from(riskPolicies)
    .where(eq(riskPolicies.tenantId, tenantId))
    .orderBy(asc(riskPolicies.assetCode));
  return {
    assets: tenantAssets,
    rules: rows.map((row) => ({
      assetCode: row.assetCode,
      decimals: decimalsOf.get(row.assetCode) ?? 0,
      autoApproveMaxMinor: row.autoApproveMaxMinor,
      fourEyesMinMinor: row.fourEyesMinMinor,
      velocityMaxPerHour: row.velocityMaxPerHour,
      similarWindowMinutes: row.similarWindowMinutes,
      updatedAt: row.updatedAt.toISOString(),
    })),
  };
}

/**
 * Changes one asset's rules now (a tightening from the staff screen, or a loosening its admins
 * approved, applied after the delay: ../governance/controls.ts decides which). Validated before anything is written (whole,
 * non-negative minor units; four-eyes above auto-approve; an asset the tenant has), so a refusal
 * changes nothing. The similar-withdrawal window, which the screen does not edit, is kept. The
 * database records the change and its actor in the policy history
 * (core/sql/idem_record_policy_change.sql).
 */
export async function changeRiskRuleNow(
  tx: Tx,
  tenantId: string,
  rawInput: SetRiskRuleInput,
  actor: string,
): Promise<{ changed: boolean; policyVersion: number }> {
  const parsed = setRiskRuleInputSchema.safeParse(rawInput);
  if (!parsed.success) {
    throw new IdemError('VALIDATION', parsed.error.issues[0]?.message ?? 'invalid risk rule');
  }
  const input = parsed.data;
  const [asset] = await tx
    .select({ code: assets.code })
    .from(assets)
    .where(and(eq(assets.tenantId, tenantId), eq(assets.code, input.assetCode)));
  if (!asset) throw new IdemError('VALIDATION', `the tenant has no asset ${input.assetCode}`);
  const [current] = await tx
    .select({ similarWindowMinutes: riskPolicies.similarWindowMinutes })
    .from(riskPolicies)
    .where(and(eq(riskPolicies.tenantId, tenantId), eq(riskPolicies.assetCode, input.assetCode)));
  return setRiskPolicy(tx, {
    tenantId,
    assetCode: input.assetCode,
    autoApproveMaxMinor: input.autoApproveMaxMinor,
    fourEyesMinMinor: input.fourEyesMinMinor,
    velocityMaxPerHour: input.velocityMaxPerHour,
    ...(current ? { similarWindowMinutes: current.similarWindowMinutes } : {}),
    actor,
  });
}

/** The policy history, oldest first, with the e-mail of each staff member who made a change. */
export async function riskRuleHistory(tx: Tx, tenantId: string): Promise<PolicyChangeView[]> {
  const changes = await policyHistory(tx, tenantId);
  const staff = await tx
    .select({ userId: staffUsers.userId, email: staffUsers.email })
    .from(staffUsers)
    .where(eq(staffUsers.tenantId, tenantId));
  const emailOf = new Map(staff.map((s) => [staffActor(s.userId), s.email]));
  return changes.map((change) => ({
    toVersion: change.toVersion,
    fromVersion: change.fromVersion,
    assetCode: change.assetCode,
    before: change.before,
    after: change.after,
    actor: change.actor,
    actorEmail: emailOf.get(change.actor) ?? null,
    changedAt: change.changedAt.toISOString(),
  }));
}
