import {
  type ControlChange,
  type ControlChangeProposal,
  controlChangeProposalSchema,
  IdemError,
} from '@idem/contracts';
import { and, eq, sql } from 'drizzle-orm';
import { activateApiKey, setApiKeyScopes } from '../../access/api-keys.ts';
import type { Tx } from '../../db/connect.ts';
import {
  apiKeys,
  outboundEndpoints,
  riskPolicies,
  staffPasskeys,
  staffUsers,
} from '../../db/schema/index.ts';
import { activateOutboundEndpoint } from '../../delivery/outbound-endpoints.ts';
import { freezeInForce, liftFreeze } from '../../freeze/freeze.ts';
import { applyFreezeTrip, freezeTripInForce } from '../../freeze/trips.ts';
import { changeRiskRuleNow } from '../../risk/rules.ts';
import { activatePasskey } from '../../staff/passkeys.ts';
import { inviteStaff, setStaffRole } from '../../staff/team.ts';
import { normalizeEmail } from '../../staff/users.ts';
import { activeAdminCount, governanceOf, settingsOf, writeGovernance } from '../../tenants/governance.ts';
import type { ProposalRule } from '../kinds.ts';

/**
 * A change that loosens a control (a risk rule, the governance settings, a member's role, a
 * member re-enabled, a member invited, a new API key, a key's added scope, a new outbound
 * endpoint). Other admins approve it, as many as the tenant's quorum asks beside the
 * proposer; then it waits out the tenant's delay (state APPROVED) and the governance executor
 * applies it (../control.ts). A tenant with one admin loosens nothing.
 */
export const controlChangeRule: ProposalRule<ControlChangeProposal> = {
  schema: controlChangeProposalSchema,
  async prepare(tx: Tx, { tenantId, payload }) {
    return { targetOperationId: null, evidence: { inForce: await inForce(tx, tenantId, payload.change) } };
  },
  async approvalsRequired(tx, { tenantId, payload }) {
    const admins = await activeAdminCount(tx, tenantId);
    // A member who is not an admin proposes their own passkey: the admins (a lone one too) decide.
    if (payload.change.control === 'passkey_register' && admins >= 1) {
      const [owner] = await tx
        .select({ role: staffUsers.role })
        .from(staffUsers)
        .where(and(eq(staffUsers.tenantId, tenantId), eq(staffUsers.userId, payload.change.userId)));
      if (owner && owner.role !== 'admin') {
        const { adminQuorum } = await governanceOf(tx, tenantId);
        return Math.max(1, Math.min(adminQuorum, admins) - 1);
      }
    }
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
    const applied = await apply(
      tx,
      proposal.tenantId,
      payload.change,
      proposal.proposedBy,
      proposal.proposalId,
    );
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
    case 'staff_invite':
      // Nobody with this e-mail yet (the screen refuses an invite for an existing member).
      return { member: null };
    case 'api_key_create':
    case 'api_key_scopes': {
      // What the approvers are asked to let authenticate: never the key, which only its minter saw.
      const [key] = await tx
        .select({
          label: apiKeys.label,
          scopes: apiKeys.scopes,
          createdBy: apiKeys.createdBy,
          expiresAt: apiKeys.expiresAt,
          activatedAt: apiKeys.activatedAt,
          revokedAt: apiKeys.revokedAt,
        })
        .from(apiKeys)
        .where(and(eq(apiKeys.tenantId, tenantId), eq(apiKeys.keyId, change.keyId)));
      if (!key || key.revokedAt) throw new IdemError('NOT_FOUND', 'no active API key with that id');
      return {
        label: key.label,
        scopes: key.scopes,
        createdBy: key.createdBy,
        expiresAt: key.expiresAt?.toISOString() ?? null,
        active: key.activatedAt !== null,
      };
    }
    case 'webhook_endpoint_create': {
      const [endpoint] = await tx
        .select({ url: outboundEndpoints.url, disabledAt: outboundEndpoints.disabledAt })
        .from(outboundEndpoints)
        .where(
          and(eq(outboundEndpoints.tenantId, tenantId), eq(outboundEndpoints.endpointId, change.endpointId)),
        );
      if (!endpoint || endpoint.disabledAt) throw new IdemError('NOT_FOUND', 'no such outbound endpoint');
      return { url: endpoint.url, active: false };
    }
    case 'passkey_register': {
      // What the approvers are asked to trust: whose device, its label, when it was registered,
      // and its public key, so that their approval binds this key (the signer service trusts the
      // credential with this key only, whatever key the row holds later).
      const [passkey] = await tx
        .select({
          userId: staffPasskeys.userId,
          publicKey: staffPasskeys.publicKey,
          label: staffPasskeys.label,
          createdAt: staffPasskeys.createdAt,
          activatedAt: staffPasskeys.activatedAt,
          revokedAt: staffPasskeys.revokedAt,
          email: staffUsers.email,
          role: staffUsers.role,
        })
        .from(staffPasskeys)
        .innerJoin(
          staffUsers,
          and(eq(staffUsers.tenantId, staffPasskeys.tenantId), eq(staffUsers.userId, staffPasskeys.userId)),
        )
        .where(
          and(eq(staffPasskeys.tenantId, tenantId), eq(staffPasskeys.credentialId, change.credentialId)),
        );
      if (!passkey || passkey.revokedAt || passkey.userId !== change.userId) {
        throw new IdemError('NOT_FOUND', 'no such passkey of that member');
      }
      return {
        member: passkey.email,
        role: passkey.role,
        label: passkey.label,
        registeredAt: passkey.createdAt.toISOString(),
        active: passkey.activatedAt !== null,
        publicKey: passkey.publicKey,
      };
    }
    case 'freeze_lift': {
      // What the approvers release: the scope, who froze it, when and why.
      const { pendingLiftProposalId: _, ...frozen } = await freezeInForce(tx, tenantId, change.freezeId);
      return frozen;
    }
    case 'freeze_trip_loosen':
      // The trips the approvers loosen, as they stand (null: none set for that asset yet).
      return freezeTripInForce(tx, tenantId, change.trip.assetCode);
  }
}

async function apply(
  tx: Tx,
  tenantId: string,
  change: ControlChange,
  actor: string,
  proposalId: string,
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
    case 'staff_invite': {
      // Still nobody with this e-mail? Someone may have been added meanwhile (the CLI, another
      // invite): then it is refused with IDEMPOTENCY_CONFLICT, as the direct path refuses it.
      const [member] = await tx
        .select({ userId: staffUsers.userId })
        .from(staffUsers)
        .where(and(eq(staffUsers.tenantId, tenantId), eq(staffUsers.email, normalizeEmail(change.email))));
      if (member)
        throw new IdemError('IDEMPOTENCY_CONFLICT', 'a staff member with this e-mail already exists');
      // The invitation and its e-mail, exactly as a lone admin's invite makes them, in the
      // proposer's name; the link goes to the invitee only (the result keeps the member, not the link).
      const invited = await inviteStaff(tx, {
        tenantId,
        email: change.email,
        role: change.role,
        createdBy: actor,
        linkOrigin: change.linkOrigin,
      });
      return { userId: invited.user.userId, role: change.role, expiresAt: invited.expiresAt.toISOString() };
    }
    case 'api_key_create':
      return { ...(await activateApiKey(tx, tenantId, change.keyId)), activated: true };
    case 'api_key_scopes':
      // The proposer is recorded as the key's widener: four eyes refuses them on what it submits.
      return setApiKeyScopes(tx, tenantId, { keyId: change.keyId, scopes: change.scopes, actor });
    case 'webhook_endpoint_create':
      return { ...(await activateOutboundEndpoint(tx, tenantId, change.endpointId)), activated: true };
    case 'passkey_register':
      return { ...(await activatePasskey(tx, tenantId, change)), activated: true };
    case 'freeze_lift':
      return liftFreeze(tx, { tenantId, freezeId: change.freezeId, proposalId, actor });
    case 'freeze_trip_loosen':
      return { trip: await applyFreezeTrip(tx, tenantId, change.trip, actor) };
  }
}
