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
import { inviteStaff, type StaffInvitationInput, setStaffRole } from '../staff/team.ts';
import { normalizeEmail } from '../staff/users.ts';
import { activeAdminCount, writeGovernance } from '../tenants/governance.ts';
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

/**
 * The quorum, the delay and the proposal lifetime: every change to them is proposed. Requiring
 * passkeys for approvals, asked alone, tightens and applies at once; turning it off is proposed.
 */
export async function changeGovernance(
  tx: Tx,
  input: { tenantId: string; settings: GovernanceSettingsInput; actor: string },
): Promise<ControlChangeOutcome> {
  const settings = governanceSettingsInputSchema.parse(input.settings);
  if (Object.keys(settings).length === 1 && settings.requirePasskeyApprovals === true) {
    await writeGovernance(tx, input.tenantId, { requirePasskeyApprovals: true });
    return APPLIED;
  }
  const change = { control: 'governance' as const, settings };
  return proposed(
    (await proposeControlChange(tx, { tenantId: input.tenantId, actor: input.actor, change })).proposal,
  );
}

/**
 * Inviting a member. With two active admins or more (quorum mode) it is a control change: one
 * admin alone could otherwise invite accomplices, so other admins approve it and the invitation is
 * created and e-mailed only when the governance executor applies it, after the tenant's delay.
 * A lone admin (single-admin mode) invites at once: that is how a tenant gets its second admin.
 * Either way the link goes to the invitee's e-mail only, never to the answer.
 */
export async function requestStaffInvite(
  tx: Tx,
  input: StaffInvitationInput,
): Promise<ControlChangeOutcome & { userId: string | null; email: string; expiresAt: Date | null }> {
  const email = normalizeEmail(input.email);
  const [member] = await tx
    .select({ userId: staffUsers.userId })
    .from(staffUsers)
    .where(and(eq(staffUsers.tenantId, input.tenantId), eq(staffUsers.email, email)));
  if (member) throw new IdemError('IDEMPOTENCY_CONFLICT', 'a staff member with this e-mail already exists');
  if ((await activeAdminCount(tx, input.tenantId)) < 2) {
    const invited = await inviteStaff(tx, { ...input, email });
    return { ...APPLIED, userId: invited.user.userId, email, expiresAt: invited.expiresAt };
  }
  const change = {
    control: 'staff_invite' as const,
    email,
    role: input.role,
    linkOrigin: new URL(input.linkOrigin).origin,
  };
  const { proposal } = await proposeControlChange(tx, {
    tenantId: input.tenantId,
    actor: input.createdBy,
    change,
  });
  return { ...proposed(proposal), userId: null, email, expiresAt: null };
}
