import { z } from 'zod';
import { assetCodeSchema } from './asset-code.ts';
import { referenceSchema } from './key.ts';

/**
 * The freeze switch (docs/GOVERNANCE.md "Freeze"): per tenant, per asset or per account. Freezing
 * is a tightening: one member with `operate` freezes at once. Lifting it is a loosening: a
 * `freeze_lift` control change other admins approve. While a freeze is in force nothing under it is
 * signed or sent: its withdrawals are held (never refused) and shown; reads, deposits,
 * reconciliation and the settlement of what is already on chain go on.
 */
export const freezeScopes = ['tenant', 'asset', 'account'] as const;
export const freezeScopeSchema = z.enum(freezeScopes);
export type FreezeScope = (typeof freezeScopes)[number];

const reasonSchema = z.string().trim().min(1, { error: 'say why you freeze' }).max(500);

export const freezeInputSchema = z.discriminatedUnion('scope', [
  z.strictObject({ scope: z.literal('tenant'), reason: reasonSchema }),
  z.strictObject({ scope: z.literal('asset'), assetCode: assetCodeSchema, reason: reasonSchema }),
  z.strictObject({ scope: z.literal('account'), accountRef: referenceSchema, reason: reasonSchema }),
]);
export type FreezeInput = z.infer<typeof freezeInputSchema>;

/** Proposes lifting one freeze: other admins approve it, the governance step applies it. */
export const proposeUnfreezeInputSchema = z.strictObject({ freezeId: z.uuid() });
export type ProposeUnfreezeInput = z.infer<typeof proposeUnfreezeInputSchema>;

export const freezeViewSchema = z.object({
  freezeId: z.uuid(),
  scope: freezeScopeSchema,
  assetCode: z.string().nullable(),
  accountRef: z.string().nullable(),
  reason: z.string(),
  frozenBy: z.string(),
  frozenAt: z.string(),
  /** Null while in force. */
  liftedAt: z.string().nullable(),
  liftedBy: z.string().nullable(),
  /** The control change that lifted it. */
  liftProposalId: z.uuid().nullable(),
  /** An open or approved `freeze_lift` proposal waiting for its approvers or its delay. */
  pendingLiftProposalId: z.uuid().nullable(),
});
export type FreezeView = z.infer<typeof freezeViewSchema>;

/** A withdrawal not yet signed that a freeze in force holds: kept, shown, not signed or sent. */
export const heldWithdrawalViewSchema = z.object({
  operationId: z.uuid(),
  accountRef: z.string(),
  assetCode: z.string(),
  amountMinor: z.string(),
  state: z.string(),
  createdAt: z.string(),
  /** The freezes in force that hold it. */
  heldBy: z.array(z.uuid()),
});
export type HeldWithdrawalView = z.infer<typeof heldWithdrawalViewSchema>;

export const freezesViewSchema = z.object({
  freezes: z.array(freezeViewSchema),
  held: z.array(heldWithdrawalViewSchema),
});
export type FreezesView = z.infer<typeof freezesViewSchema>;
