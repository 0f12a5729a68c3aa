import { z } from 'zod';
import { amountMinorSchema, signedAmountMinorSchema } from './amount.ts';
import { assetCodeSchema } from './asset-code.ts';
import { idempotencyKeySchema, referenceSchema } from './key.ts';
import { payloadHashSchema } from './operation.ts';
import { cursorSchema, pageLimitSchema } from './paging.ts';
import { passkeyAssertionSchema } from './passkeys.ts';

/**
 * Proposals: one staff member proposes an action that moves or releases money, another approves
 * it (four eyes), bound to the hash of the exact payload and the evidence shown. One mechanism for
 * every such action; each kind below names its payload.
 */
export const proposalKinds = [
  'resolve_withdrawal',
  'adjustment',
  'manual_credit',
  'cancel_withdrawal',
  'raise_fee_cap',
  'control_change',
] as const;
export const proposalKindSchema = z.enum(proposalKinds);
export type ProposalKind = z.infer<typeof proposalKindSchema>;

/** APPROVED: a control change with its approvals, waiting out the tenant's delay before it applies. */
export const proposalStates = [
  'PENDING',
  'APPROVED',
  'EXECUTED',
  'REJECTED',
  'CANCELLED',
  'EXPIRED',
] as const;
export const proposalStateSchema = z.enum(proposalStates);
export type ProposalState = z.infer<typeof proposalStateSchema>;

/** Why, in words an auditor can read. It lands in immutable history: no personal data. */
const auditReason = z.string().trim().min(10, { error: 'say why, in at least 10 characters' }).max(128);

/** A correction of an account's available balance against the adjustments account. */
export const adjustmentProposalSchema = z.strictObject({
  accountId: referenceSchema,
  asset: assetCodeSchema,
  /** Signed: a negative adjustment debits available funds, and only if they are there. */
  amountMinor: signedAmountMinorSchema,
  reason: auditReason,
});
export type AdjustmentProposal = z.infer<typeof adjustmentProposalSchema>;

/** A credit for money that arrived outside the watched paths (custody control against the account). */
export const manualCreditProposalSchema = z.strictObject({
  accountId: referenceSchema,
  asset: assetCodeSchema,
  amountMinor: amountMinorSchema,
  /** Where the money is seen: the chain transaction, the custodian's record, the bank reference. */
  reference: referenceSchema,
  reason: auditReason,
});
export type ManualCreditProposal = z.infer<typeof manualCreditProposalSchema>;

/** A person's resolution of an UNKNOWN or FAILED_TERMINAL withdrawal. */
export const resolveWithdrawalProposalSchema = z.strictObject({
  operationId: z.uuid(),
  toState: z.enum(['CONFIRMED', 'VERIFIED_NOT_SENT']),
  /** For CONFIRMED on a chain rail: the transaction that paid (else the stored one). */
  txHash: z
    .string()
    .regex(/^0x[0-9a-fA-F]{64}$/)
    .optional(),
  summary: z.string().trim().min(10, { error: 'say what was checked, in at least 10 characters' }).max(2000),
});
export type ResolveWithdrawalProposal = z.infer<typeof resolveWithdrawalProposalSchema>;

/**
 * Cancel a sent, unmined chain withdrawal: the worker signs a zero-value transfer to
 * the hot wallet itself with the same nonce and a higher fee. If it is mined, the withdrawal is
 * VERIFIED_NOT_SENT and the hold released; if the payment is mined first, it settles as usual.
 */
export const cancelWithdrawalProposalSchema = z.strictObject({
  operationId: z.uuid(),
  reason: auditReason,
});
export type CancelWithdrawalProposal = z.infer<typeof cancelWithdrawalProposalSchema>;

/**
 * A new fee cap for a sent withdrawal whose fee bump needs more than the approved one:
 * the total fee (gas limit x max fee per gas) in the network's native minor units (wei).
 */
export const raiseFeeCapProposalSchema = z.strictObject({
  operationId: z.uuid(),
  feeCapMinor: amountMinorSchema,
  reason: auditReason,
});
export type RaiseFeeCapProposal = z.infer<typeof raiseFeeCapProposalSchema>;

export const proposeInputSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('adjustment'),
    idempotencyKey: idempotencyKeySchema,
    payload: adjustmentProposalSchema,
  }),
  z.strictObject({
    kind: z.literal('manual_credit'),
    idempotencyKey: idempotencyKeySchema,
    payload: manualCreditProposalSchema,
  }),
  z.strictObject({
    kind: z.literal('resolve_withdrawal'),
    idempotencyKey: idempotencyKeySchema,
    payload: resolveWithdrawalProposalSchema,
  }),
  z.strictObject({
    kind: z.literal('cancel_withdrawal'),
    idempotencyKey: idempotencyKeySchema,
    payload: cancelWithdrawalProposalSchema,
  }),
  z.strictObject({
    kind: z.literal('raise_fee_cap'),
    idempotencyKey: idempotencyKeySchema,
    payload: raiseFeeCapProposalSchema,
  }),
]);
export type ProposeInput = z.infer<typeof proposeInputSchema>;

export const proposalDecisionViewSchema = z.object({
  approver: z.string(),
  decision: z.enum(['approve', 'reject']),
  reason: z.string().nullable(),
  /** The passkey that signed this decision (I32-TRUST), or null: decided without one. */
  passkeyCredentialId: z.string().nullable(),
  decidedAt: z.string(),
});

export const proposalViewSchema = z.object({
  proposalId: z.uuid(),
  kind: proposalKindSchema,
  state: proposalStateSchema,
  payload: z.record(z.string(), z.unknown()),
  evidence: z.record(z.string(), z.unknown()).nullable(),
  payloadHash: z.string(),
  targetOperationId: z.uuid().nullable(),
  proposedBy: z.string(),
  proposedAt: z.string(),
  /** Distinct approvers needed besides the proposer: by amount, or the tenant's admin quorum. */
  approvalsRequired: z.number().int(),
  /** Approvals bound to the hash by members still active and still allowed to decide. */
  approvalsGiven: z.number().int(),
  /** Nobody may decide after this; the proposal is then EXPIRED. */
  expiresAt: z.string(),
  /** A control change approved: when it takes effect (the tenant's delay after approval). */
  effectiveAt: z.string().nullable(),
  decisions: z.array(proposalDecisionViewSchema),
  result: z.record(z.string(), z.unknown()).nullable(),
  decidedAt: z.string().nullable(),
});
export type ProposalView = z.infer<typeof proposalViewSchema>;

export const proposeOutputSchema = z.object({
  outcome: z.enum(['CREATED', 'REPLAYED']),
  proposal: proposalViewSchema,
});

export const decideProposalInputSchema = z.strictObject({
  proposalId: z.uuid(),
  /** The hash the approver was shown; a different one is refused (PAYLOAD_MISMATCH). */
  payloadHash: payloadHashSchema,
  decision: z.enum(['approve', 'reject']),
  reason: z.string().trim().max(500).optional(),
  /**
   * The decider's passkey assertion over proposalChallenge(proposalId, payloadHash, decision):
   * required, to approve or reject, once the decider has an active passkey (docs/GOVERNANCE.md
   * "Passkeys").
   */
  assertion: passkeyAssertionSchema.optional(),
});

export const listProposalsInputSchema = z.strictObject({
  state: proposalStateSchema.optional(),
  targetOperationId: z.uuid().optional(),
  cursor: cursorSchema.optional(),
  limit: pageLimitSchema,
});

export const proposalPageSchema = z.object({
  items: z.array(proposalViewSchema),
  nextCursor: z.string().nullable(),
});
