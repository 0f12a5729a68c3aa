import { z } from 'zod';
import { amountMinorSchema } from './amount.ts';
import { assetCodeSchema } from './asset-code.ts';
import { memoSchema, operationViewSchema } from './operation.ts';
import { timelineEntrySchema } from './staff-operations.ts';

/** What the customer screens send and see of the account's own withdrawals. */

const uuid = z.uuid();

/**
 * A customer's withdrawal. `intentId` is minted once per intent in the browser and kept across a
 * reload; the withdrawal id and the idempotency key derive from it, so every resubmission of one
 * intent reaches the same operation.
 */
export const customerWithdrawInputSchema = z.strictObject({
  intentId: uuid,
  asset: assetCodeSchema,
  destination: z.string().trim().min(1).max(128),
  memo: memoSchema.optional(),
  amountMinor: amountMinorSchema,
  /**
   * The person saw this in-progress withdrawal of the account with the same asset, destination and
   * amount, and confirmed they want another one (I14-DEVICE). Without it such a repeat is refused
   * with POSSIBLE_DUPLICATE.
   */
  confirmDuplicateOf: uuid.optional(),
});

/** The customer sees when their withdrawal moved, never who moved it or on which evidence. */
export const customerTimelineEntrySchema = timelineEntrySchema.pick({
  seq: true,
  fromState: true,
  toState: true,
  createdAt: true,
});
export const customerOperationDetailSchema = z.object({
  withdrawal: operationViewSchema,
  timeline: z.array(customerTimelineEntrySchema),
  /** The transaction on the operator's block explorer for its network; null without a hash or a template. */
  explorerUrl: z.string().nullable(),
});
