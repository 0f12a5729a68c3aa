import {
  type ControlChange,
  type ControlChangeProposal,
  controlChangeProposalSchema,
  IdemError,
} from '@idem/contracts';
import { and, eq, sql } from 'drizzle-orm';
import type { Tx } from '../../db/connect.ts';
import { riskPolicies, staffUsers } from '../../db/schema/index.ts';
import { changeRiskRuleNow } from '../../risk/rules.ts';
import { setStaffRole } from '../../staff/team.ts';
import { activeAdminCount, governanceOf, settingsOf, writeGovernance } from '../../tenants/governance.ts';
import type { ProposalRule } from '../kinds.ts';

/**
 * A change that loosens a control (a risk rule, the governance settings, a member's role, a
 * member re-enabled). Other admins approve it, as many as the tenant's quorum asks beside the
 * proposer; then it waits out the tenant's delay (state APPROVED) and the governance executor
 * applies it (../control.ts). A tenant with one admin loosens nothing.
 */
export const controlChangeRule: ProposalRule<ControlChangeProposal> = {
  schema: controlChangeProposalSchema,
  async prepare(tx: Tx, { tenantId, payload }) {
    return { targetOperationId: null, evidence: { inForce: await inForce(tx, tenantId, payload.change) } };
  },
  async approvalsRequired(tx, { tenantId }) {
    const admins = await activeAdminCount(tx, tenantId);
    if (admins < 2) {
      throw new IdemError(
        'FORBIDDEN',
        'a tenant with one admin loosens no control: add a second admin first (docs/GOVERNANCE.md)',
      );
    }
    const { adminQuorum } = await governanceOf(tx, tenantId);
    return Math.max(1, Math.min(adminQuorum, admins) - 1);
  },
  approverPermission: 'administer',
  delayed: true,
  async execute(tx, { proposal, payload, approvers }) {
    // The policy history names the proposer; the proposal names the approvers (approvedBy).
    const applied = await apply(tx, proposal.tenantId, payload.change, proposal.proposedBy);
    return { control: payload.change.control, approvers, ...applied };
  },
};

/** What the change replaces, as the approvers are shown it (bound into the hash). */
async function inForce(tx: Tx, tenantId: string, change: ControlChange): Promise<unknown> {
  switch (change.control) {
    case 'risk_rule': {
      const [rule] = await tx
        .select({
          autoApproveMaxMinor: riskPolicies.autoApproveMaxMinor,
          fourEyesMinMinor: riskPolicies.fourEyesMinMinor,
          velocityMaxPerHour: riskPolicies.velocityMaxPerHour,
        })
        .from(riskPolicies)
        .where(and(eq(riskPolicies.tenantId, tenantId), eq(riskPolicies.assetCode, change.rule.assetCode)));
      return rule ?? null;
    }
    case 'governance':
      return governanceOf(tx, tenantId);
    case 'staff_role':
    case 'staff_enable': {
      const [member] = await tx
        .select({ role: staffUsers.role, disabledAt: staffUsers.disabledAt })
        .from(staffUsers)
        .where(and(eq(staffUsers.tenantId, tenantId), eq(staffUsers.userId, change.userId)));
      if (!member) throw new IdemError('NOT_FOUND', 'no such staff member');
      return { role: member.role, disabled: member.disabledAt !== null };
    }
  }
}

async function apply(
  tx: Tx,
  tenantId: string,
  change: ControlChange,
  actor: string,
): Promise<Record<string, unknown>> {
  switch (change.control) {
    case 'risk_rule':
      return changeRiskRuleNow(tx, tenantId, change.rule, actor);
    case 'governance':
      return { settings: await writeGovernance(tx, tenantId, settingsOf(change.settings)) };
    case 'staff_role':
      await setStaffRole(tx, { tenantId, userId: change.userId, role: change.role });
      return { userId: change.userId, role: change.role };
    case 'staff_enable':
      await tx
        .update(staffUsers)
        .set({ disabledAt: sql`null` })
        .where(and(eq(staffUsers.tenantId, tenantId), eq(staffUsers.userId, change.userId)));
      return { userId: change.userId, enabled: true };
  }
}
