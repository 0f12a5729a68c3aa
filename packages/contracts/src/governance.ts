import { z } from 'zod';
import { apiKeyScopeSetSchema, setRiskRuleInputSchema } from './config.ts';
import { freezeTripSettingsSchema } from './freeze-trips.ts';
import { staffRoleSchema } from './staff-roles.ts';

/**
 * Control changes: what loosens a tenant's controls goes through other admins' approval (the
 * tenant's admin quorum) and takes effect only after the tenant's delay; what tightens takes effect
 * at once (docs/GOVERNANCE.md). Each change names the control and its new value.
 */
export const governanceSettingsInputSchema = z
  .strictObject({
    /** Admins who must agree to a loosening, the proposer included (M of N; at least 2). */
    adminQuorum: z.number().int().min(2).max(20).optional(),
    /** Seconds between a loosening's approval and its effect (0..30 days). */
    looseningDelaySeconds: z.number().int().min(0).max(2_592_000).optional(),
    /** Seconds a proposal stays open (1 s..30 days). */
    proposalTtlSeconds: z.number().int().min(1).max(2_592_000).optional(),
    /**
     * Every withdrawal approval needs the approver's passkey (docs/GOVERNANCE.md "Passkeys"):
     * `true` alone applies at once (a tightening); `false` is proposed like every loosening.
     */
    requirePasskeyApprovals: z.boolean().optional(),
  })
  .refine((s) => Object.keys(s).length > 0, { error: 'name at least one setting to change' });
export type GovernanceSettingsInput = z.infer<typeof governanceSettingsInputSchema>;

export const controlChangeSchema = z.discriminatedUnion('control', [
  z.strictObject({ control: z.literal('risk_rule'), rule: setRiskRuleInputSchema }),
  z.strictObject({ control: z.literal('governance'), settings: governanceSettingsInputSchema }),
  z.strictObject({ control: z.literal('staff_role'), userId: z.uuid(), role: staffRoleSchema }),
  z.strictObject({ control: z.literal('staff_enable'), userId: z.uuid() }),
  /**
   * A new member, invited once other admins approve: at application the invitation is created and
   * its link e-mailed to `email` only. `linkOrigin` is the deployment's public origin the link is
   * built on (set by the server from IDEM_PUBLIC_URL, never from a request; shown to the approvers).
   */
  z.strictObject({
    control: z.literal('staff_invite'),
    email: z.email().max(254),
    role: staffRoleSchema,
    linkOrigin: z.url(),
  }),
  /** A key minted inactive (its secret already shown once to its minter): applying activates it. */
  z.strictObject({ control: z.literal('api_key_create'), keyId: z.uuid() }),
  /** A key's new scope list, adding at least one scope: applying sets it, the proposer its widener. */
  z.strictObject({ control: z.literal('api_key_scopes'), keyId: z.uuid(), scopes: apiKeyScopeSetSchema }),
  /** An outbound endpoint stored inactive (URL checked, secret shown once): applying activates it. */
  z.strictObject({ control: z.literal('webhook_endpoint_create'), endpointId: z.uuid() }),
  /**
   * A member's passkey stored inactive (registered from their own device): applying activates it,
   * so it can sign that member's approvals. Proposed by the member, approved by other admins.
   */
  z.strictObject({
    control: z.literal('passkey_register'),
    credentialId: z.string().min(1).max(1400),
    userId: z.uuid(),
  }),
  /**
   * Lifting a freeze (docs/GOVERNANCE.md "Freeze"): freezing applies at once, but what one member
   * froze is released only when other admins agree. Applying records the lift; the freeze stays.
   */
  z.strictObject({ control: z.literal('freeze_lift'), freezeId: z.uuid() }),
  /**
   * Turning off or loosening automatic freeze trips (docs/GOVERNANCE.md "Automatic trips"): names
   * the whole row as it will be, so an approval of one value writes no other (the database checks
   * the row against it).
   */
  z.strictObject({ control: z.literal('freeze_trip_loosen'), trip: freezeTripSettingsSchema }),
]);
export type ControlChange = z.infer<typeof controlChangeSchema>;

/** The payload of a control_change proposal. */
export const controlChangeProposalSchema = z.strictObject({ change: controlChangeSchema });
export type ControlChangeProposal = z.infer<typeof controlChangeProposalSchema>;

export const governanceViewSchema = z.object({
  adminQuorum: z.number().int(),
  looseningDelaySeconds: z.number().int(),
  proposalTtlSeconds: z.number().int(),
  requirePasskeyApprovals: z.boolean(),
  /** Active admins now; a loosening needs min(adminQuorum, activeAdmins) of them, and 2 at least. */
  activeAdmins: z.number().int(),
  /** 'setup': no admin yet; 'single_admin': one admin, nothing can be loosened; 'quorum'. */
  mode: z.enum(['setup', 'single_admin', 'quorum']),
});
export type GovernanceView = z.infer<typeof governanceViewSchema>;

/** What a control change answered: in force now (a tightening), or proposed to the other admins. */
export const controlChangeOutcomeSchema = z.object({
  outcome: z.enum(['APPLIED', 'PROPOSED']),
  /** The proposal other admins approve, when PROPOSED. */
  proposalId: z.uuid().nullable(),
  approvalsRequired: z.number().int().nullable(),
});
export type ControlChangeOutcome = z.infer<typeof controlChangeOutcomeSchema>;

export const staffNotificationViewSchema = z.object({
  notificationId: z.uuid(),
  topic: z.string(),
  proposalId: z.uuid().nullable(),
  message: z.string(),
  createdAt: z.string(),
});
export type StaffNotificationView = z.infer<typeof staffNotificationViewSchema>;
