import { z } from 'zod';
import { amountMinorSchema } from './amount.ts';
import { assetCodeSchema } from './asset-code.ts';
import { idempotencyKeySchema, referenceSchema } from './key.ts';
import { feeCapProblem, networkSchema } from './network.ts';

/** The states of seed 000's state machine. Deposits and adjustments use a subset (see core). */
export const operationStates = [
  'REQUESTED',
  'APPROVED',
  'REJECTED',
  'SIGNING',
  'SIGNED',
  'BROADCAST',
  'UNKNOWN',
  'CONFIRMED',
  'VERIFIED_NOT_SENT',
  'FAILED_TERMINAL',
  // Deposits only: a credited deposit undone by a reorganisation, through a compensating entry.
  'REVERSED',
] as const;
export const operationStateSchema = z.enum(operationStates);
export type OperationState = z.infer<typeof operationStateSchema>;

export const operationKinds = ['withdrawal', 'deposit', 'adjustment'] as const;
export const operationKindSchema = z.enum(operationKinds);
export type OperationKind = z.infer<typeof operationKindSchema>;

/**
 * The hex SHA-256 of an operation's or a proposal's approved payload (C02), as shown to an approver
 * and sent back with the decision. Computed by ./payload-hash.ts (Node only).
 */
export const payloadHashSchema = z.string().regex(/^[0-9a-f]{64}$/);

export const memoSchema = z.string().max(128, { error: 'memo is longer than 128 characters' });

/** What an integrator submits. The tenant never comes from here: it comes from the credential. */
export const withdrawalRequestSchema = z
  .strictObject({
    withdrawalId: referenceSchema,
    accountId: referenceSchema,
    asset: assetCodeSchema,
    /** Optional; when given it must be the asset's network, so a caller's mistaken assumption is caught. */
    network: networkSchema.optional(),
    destination: z.string().min(1).max(128),
    memo: memoSchema.optional(),
    amountMinor: amountMinorSchema,
    /** The most the network fee may cost, in the network's native minor units (wei of ETH); see FEE_CAP_RULES. */
    feeCapMinor: amountMinorSchema.optional(),
  })
  .superRefine((request, check) => {
    // With the network named, the cap is checked here; otherwise at creation, once the asset's network is known.
    if (request.network === undefined || request.feeCapMinor === undefined) return;
    const problem = feeCapProblem(request.network, request.feeCapMinor);
    if (problem) check.addIssue({ code: 'custom', path: ['feeCapMinor'], message: problem });
  });
export type WithdrawalRequest = z.infer<typeof withdrawalRequestSchema>;

export const submitWithdrawalInputSchema = z.strictObject({
  request: withdrawalRequestSchema,
  idempotencyKey: idempotencyKeySchema,
});

/** An operation as shown to the tenant that owns it. The payload hash is internal (seed 000's privacy table). */
export const operationViewSchema = z.object({
  operationId: z.uuid(),
  kind: operationKindSchema,
  reference: z.string(),
  accountId: z.string(),
  asset: z.string(),
  network: z.string(),
  destination: z.string().nullable(),
  memo: z.string().nullable(),
  amountMinor: z.string(),
  feeCapMinor: z.string().nullable(),
  state: operationStateSchema,
  rejectionCode: z.string().nullable(),
  /** Where the money went on a chain Idem signs for: the hash of the transaction we signed and sent. */
  txHash: z.string().nullable(),
  /** Where the money went through a custodian: the custodian's id for our transfer ... */
  custodianTransferId: z.string().nullable(),
  /** ... and the on-chain hash the custodian reports for it (its word; null until it reports one). */
  custodianTxHash: z.string().nullable(),
  /** Why an APPROVED withdrawal is not being signed yet (e.g. its fee cap cannot pay the base fee). */
  waitingReason: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type OperationView = z.infer<typeof operationViewSchema>;

export const submitOutcomeSchema = z.enum(['CREATED', 'REPLAYED']);
export type SubmitOutcome = z.infer<typeof submitOutcomeSchema>;

/** The answer to a withdrawal made on a screen (customer or staff): created now, or the earlier one. */
export const withdrawOutputSchema = z.object({
  outcome: submitOutcomeSchema,
  withdrawal: operationViewSchema,
});

export const operationIdInputSchema = z.strictObject({ operationId: z.uuid() });
