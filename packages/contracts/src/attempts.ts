import { z } from 'zod';

/**
 * Signed attempts of a chain withdrawal: the original, fee bumps and a cancel, all with
 * the same nonce. Fees are in wei per gas; the fee cap is the total fee in native minor units.
 */
export const attemptViewSchema = z.object({
  attemptNo: z.number().int(),
  kind: z.enum(['original', 'replacement', 'cancel']),
  nonce: z.number().int(),
  txHash: z.string(),
  gasLimit: z.string(),
  maxFeePerGas: z.string(),
  maxPriorityFeePerGas: z.string(),
  /** mined: the settled transaction; superseded: a later attempt replaced it; latest: the newest, unsettled. */
  status: z.enum(['mined', 'superseded', 'latest', 'not_mined']),
  createdBy: z.string(),
  requestedBy: z.string().nullable(),
  createdAt: z.string(),
});
export type AttemptView = z.infer<typeof attemptViewSchema>;

export const operationAttemptsSchema = z.object({
  operationId: z.uuid(),
  state: z.string(),
  attempts: z.array(attemptViewSchema),
  feeCap: z.object({
    capMinor: z.string().nullable(),
    version: z.number().int(),
    proposalId: z.uuid().nullable(),
  }),
  cancelApproved: z.boolean(),
  /** Whether a fee bump or cancel can be asked for now (a sent, unsettled chain withdrawal). */
  replaceable: z.boolean(),
});
export type OperationAttempts = z.infer<typeof operationAttemptsSchema>;

export const bumpFeeInputSchema = z.strictObject({
  operationId: z.uuid(),
  reason: z.string().trim().min(10, { error: 'say why, in at least 10 characters' }).max(128),
});

/** One hot wallet's nonces: the chain's view beside ours, and what blocks the queue. */
export const walletNoncesSchema = z.object({
  network: z.string(),
  address: z.string(),
  /** The next nonce Idem will allocate. */
  nextNonce: z.number().int(),
  /** The chain's count of mined transactions (the nonce it expects next); null if the node cannot be asked. */
  chainLatest: z.number().int().nullable(),
  /** Mined plus the node's pool. */
  chainPending: z.number().int().nullable(),
  /** The unsettled operation at the chain's next nonce: every later nonce waits for it. */
  blocking: z
    .object({ nonce: z.number().int(), operationId: z.uuid().nullable(), state: z.string().nullable() })
    .nullable(),
  operations: z.array(
    z.object({
      nonce: z.number().int(),
      operationId: z.uuid(),
      /** The withdrawal id, to recognise it. */
      reference: z.string(),
      state: z.string(),
      attempts: z.number().int(),
      lastAttemptKind: z.string().nullable(),
    }),
  ),
  /** Nonces Idem allocated that no operation holds: should never happen (a nonce is allocated in the transaction that records its signature). */
  missing: z.array(z.number().int()),
});
export type WalletNonces = z.infer<typeof walletNoncesSchema>;
