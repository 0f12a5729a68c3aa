import {
  type ControlChangeOutcome,
  type GovernanceSettingsInput,
  governanceSettingsInputSchema,
  IdemError,
  type SetRiskRuleInput,
  type StaffRole,
  setRiskRuleInputSchema,
} from '@idem/contracts';
import { and, eq } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { assets, riskPolicies, staffUsers } from '../db/schema/index.ts';
import { proposeControlChange } from '../proposals/control.ts';
import { changeRiskRuleNow } from '../risk/rules.ts';
import { setStaffRole } from '../staff/team.ts';
import { riskRuleLoosens, roleLoosens } from './loosening.ts';

/**
 * The staff screens' control changes, each classified first: a tightening takes effect at once,
 * by one person (the staff procedure audits it); a loosening becomes a control change proposal
 * (../proposals/control.ts) that other admins approve and that applies after the tenant's delay.
 */

function proposed(proposal: { proposalId: string; approvalsRequired: number }): ControlChangeOutcome {
  return {
    outcome: 'PROPOSED',
    proposalId: proposal.proposalId,
    approvalsRequired: proposal.approvalsRequired,
  };
}

const APPLIED: ControlChangeOutcome = { outcome: 'APPLIED', proposalId: null, approvalsRequired: null };

/** One asset's risk rule: lowering limits applies now; raising any of them is proposed. */
export async function changeRiskRule(
  tx: Tx,
  tenantId: string,
  rawInput: SetRiskRuleInput,
  actor: string,
): Promise<ControlChangeOutcome & { changed: boolean; policyVersion: number | null }> {
  const parsed = setRiskRuleInputSchema.safeParse(rawInput);
  if (!parsed.success) {
    throw new IdemError('VALIDATION', parsed.error.issues[0]?.message ?? 'invalid risk rule');
  }
  const rule = parsed.data;
  const [asset] = await tx
    .select({ code: assets.code })
    .from(assets)
    .where(and(eq(assets.tenantId, tenantId), eq(assets.code, rule.assetCode)));
  if (!asset) throw new IdemError('VALIDATION', `the tenant has no asset ${rule.assetCode}`);
  const [current] = await tx
    .select({
      autoApproveMaxMinor: riskPolicies.autoApproveMaxMinor,
      fourEyesMinMinor: riskPolicies.fourEyesMinMinor,
      velocityMaxPerHour: riskPolicies.velocityMaxPerHour,
    })
    .from(riskPolicies)
    .where(and(eq(riskPolicies.tenantId, tenantId), eq(riskPolicies.assetCode, rule.assetCode)));
  if (!riskRuleLoosens(current ?? null, rule)) {
    return { ...APPLIED, ...(await changeRiskRuleNow(tx, tenantId, rule, actor)) };
  }
  const { proposal } = await proposeControlChange(tx, {
    tenantId,
    actor,
    change: { control: 'risk_rule', rule },
  });
  return { ...proposed(proposal), changed: false, policyVersion: null };
}

/** A member's role: one that takes permissions away applies now; one that gives any is proposed. */
export async function changeStaffRole(
  tx: Tx,
  input: { tenantId: string; userId: string; role: StaffRole; actor: string },
): Promise<ControlChangeOutcome> {
  const [member] = await tx
    .select({ role: staffUsers.role })
    .from(staffUsers)
    .where(and(eq(staffUsers.tenantId, input.tenantId), eq(staffUsers.userId, input.userId)));
  if (!member) throw new IdemError('NOT_FOUND', 'no such staff member');
  if (!roleLoosens(member.role as StaffRole, input.role)) {
    await setStaffRole(tx, { tenantId: input.tenantId, userId: input.userId, role: input.role });
    return APPLIED;
  }
  const change = { control: 'staff_role' as const, userId: input.userId, role: input.role };
  return proposed(
    (await proposeControlChange(tx, { tenantId: input.tenantId, actor: input.actor, change })).proposal,
  );
}

/** Re-enabling a disabled member always loosens: proposed. */
export async function enableStaff(
  tx: Tx,
  input: { tenantId: string; userId: string; actor: string },
): Promise<ControlChangeOutcome> {
  const [member] = await tx
    .select({ disabledAt: staffUsers.disabledAt })
    .from(staffUsers)
    .where(and(eq(staffUsers.tenantId, input.tenantId), eq(staffUsers.userId, input.userId)));
  if (!member) throw new IdemError('NOT_FOUND', 'no such staff member');
  if (!member.disabledAt) throw new IdemError('INVALID_TRANSITION', 'this staff member is not disabled');
  const change = { control: 'staff_enable' as const, userId: input.userId };
  return proposed(
    (await proposeControlChange(tx, { tenantId: input.tenantId, actor: input.actor, change })).proposal,
  );
}

/** The quorum, the delay and the proposal lifetime: every change to them is proposed. */
export async function changeGovernance(
  tx: Tx,
  input: { tenantId: string; settings: GovernanceSettingsInput; actor: string },
): Promise<ControlChangeOutcome> {
  const settings = governanceSettingsInputSchema.parse(input.settings);
  const change = { control: 'governance' as const, settings };
  return proposed(
    (await proposeControlChange(tx, { tenantId: input.tenantId, actor: input.actor, change })).proposal,
  );
}
