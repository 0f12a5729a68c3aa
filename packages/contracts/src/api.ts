import { z } from 'zod';
import { minorUnitsSchema, signedAmountMinorSchema } from './amount.ts';
import { apiKeyScopeSchema } from './config.ts';
import { errorCodeList } from './errors.ts';
import { idempotencyKeySchema, referenceSchema } from './key.ts';
import {
  operationStateSchema,
  operationViewSchema,
  submitOutcomeSchema,
  withdrawalRequestSchema,
} from './operation.ts';
import { cursorSchema } from './paging.ts';

/**
 * The API's request and response shapes, shared by the server's procedures (`.input()`/`.output()`)
 * and the SDK, which parses every response with them.
 */

/** The key may come in the body or in an `Idempotency-Key` header; when both are given they must agree. */
export const submitWithdrawalApiInputSchema = z.strictObject({
  request: withdrawalRequestSchema,
  idempotencyKey: idempotencyKeySchema.optional(),
});
export type SubmitWithdrawalApiInput = z.infer<typeof submitWithdrawalApiInputSchema>;

export const submitWithdrawalOutputSchema = z.object({
  outcome: submitOutcomeSchema,
  withdrawal: operationViewSchema,
});
export type SubmitWithdrawalOutput = z.infer<typeof submitWithdrawalOutputSchema>;

/** The most withdrawals one bulk call (`withdrawals.submitMany`, `POST /v1/withdrawal-batches`) takes. */
export const WITHDRAWAL_BATCH_ITEMS_MAX = 1_000;

/**
 * The bulk call's body limit on both faces: 2 KiB per item admits 1,000 items with every field at
 * its longest (about 1 KiB of JSON) and room for escapes and whitespace. Every other request keeps
 * the server's IDEM_BODY_LIMIT_BYTES.
 */
export const WITHDRAWAL_BATCH_BODY_LIMIT_BYTES = WITHDRAWAL_BATCH_ITEMS_MAX * 2_048;

/** One withdrawal of a bulk submission: its own key, as for a single submission. */
export const withdrawalBatchItemSchema = z.strictObject({
  idempotencyKey: idempotencyKeySchema,
  request: withdrawalRequestSchema,
});
export type WithdrawalBatchItem = z.infer<typeof withdrawalBatchItemSchema>;

/** The bulk call's body, as documented and typed for callers: 1 to 1,000 items, each with its key. */
export const submitWithdrawalsInputSchema = z.strictObject({
  items: z.array(withdrawalBatchItemSchema).min(1).max(WITHDRAWAL_BATCH_ITEMS_MAX),
});
export type SubmitWithdrawalsInput = z.infer<typeof submitWithdrawalsInputSchema>;

/**
 * What the server parses of the bulk call before it looks at the items: the envelope and the
 * count. Each item is then validated on its own (`withdrawalBatchItemSchema`), so one malformed
 * item is that item's VALIDATION answer and never refuses or delays the others.
 */
export const submitWithdrawalsEnvelopeSchema = z.strictObject({
  items: z
    .array(z.unknown())
    .min(1, { error: 'a batch holds at least one withdrawal' })
    .max(WITHDRAWAL_BATCH_ITEMS_MAX, {
      error: `a batch holds at most ${WITHDRAWAL_BATCH_ITEMS_MAX} withdrawals`,
    }),
});

/**
 * One item's refusal: the code and the fields a single submission's problem would carry for it.
 * Built from the same IdemError as that problem, so it holds no other tenant's data and no secret.
 */
export const withdrawalBatchItemErrorSchema = z.object({
  code: z.enum(errorCodeList as [string, ...string[]]),
  message: z.string(),
  holderKey: z.string().optional(),
  retryAfterMs: z.number().int().nonnegative().optional(),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});
export type WithdrawalBatchItemError = z.infer<typeof withdrawalBatchItemErrorSchema>;

/** One item's answer: what a single submission would have returned, or its refusal. */
export const withdrawalBatchResultSchema = z.union([
  submitWithdrawalOutputSchema,
  z.object({ error: withdrawalBatchItemErrorSchema }),
]);
export type WithdrawalBatchResult = z.infer<typeof withdrawalBatchResultSchema>;

/** One result per item, in the order of the items. */
export const submitWithdrawalsOutputSchema = z.object({ results: z.array(withdrawalBatchResultSchema) });
export type SubmitWithdrawalsOutput = z.infer<typeof submitWithdrawalsOutputSchema>;

export const getWithdrawalInputSchema = z.strictObject({ withdrawalId: referenceSchema });

export const LIST_PAGE_SIZE_MAX = 100;
export const listWithdrawalsInputSchema = z.strictObject({
  state: operationStateSchema.optional(),
  cursor: cursorSchema.optional(),
  limit: z.number().int().min(1).max(LIST_PAGE_SIZE_MAX).default(50),
});
export type ListWithdrawalsInput = z.input<typeof listWithdrawalsInputSchema>;

/** A page of operations, newest first; `nextCursor` fetches the next page (null: the last one). */
export const operationPageSchema = z.object({
  items: z.array(operationViewSchema),
  nextCursor: z.string().nullable(),
});
export const listWithdrawalsOutputSchema = operationPageSchema;
export type ListWithdrawalsOutput = z.infer<typeof listWithdrawalsOutputSchema>;

/** What a key holds (seed 004's `outcome(key)`): the withdrawal it created, or NOT_FOUND. */
export const getWithdrawalByKeyInputSchema = z.strictObject({ idempotencyKey: idempotencyKeySchema });

/** Deposits credited to the tenant's accounts, newest first, optionally for one account. */
export const listDepositsInputSchema = z.strictObject({
  accountId: referenceSchema.optional(),
  cursor: cursorSchema.optional(),
  limit: z.number().int().min(1).max(LIST_PAGE_SIZE_MAX).default(50),
});
export type ListDepositsInput = z.input<typeof listDepositsInputSchema>;
export const listDepositsOutputSchema = operationPageSchema;
export type ListDepositsOutput = z.infer<typeof listDepositsOutputSchema>;

export const getBalancesInputSchema = z.strictObject({ accountId: referenceSchema });

export const balanceViewSchema = z.object({
  asset: z.string(),
  available: minorUnitsSchema,
  held: minorUnitsSchema,
});
export const getBalancesOutputSchema = z.array(balanceViewSchema);
export type BalanceEntry = z.infer<typeof balanceViewSchema>;

export const assetViewSchema = z.object({
  code: z.string(),
  network: z.string(),
  decimals: z.number().int(),
  confirmations: z.number().int(),
});
export const listAssetsOutputSchema = z.array(assetViewSchema);
export type AssetEntry = z.infer<typeof assetViewSchema>;

/**
 * The typed error every failed call carries in tRPC's `error.data`: our stable code, the RFC 9457
 * problem fields, the request id (also the `X-Request-Id` header) and the code's details.
 */
export const problemSchema = z.object({
  code: z.enum(errorCodeList as [string, ...string[]]),
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  requestId: z.string(),
  holderKey: z.string().optional(),
  duplicateOf: z.object({ operationId: z.string(), state: z.string(), createdAt: z.string() }).optional(),
  retryAfterMs: z.number().int().nonnegative().optional(),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  /** On FORBIDDEN for an API key: the scope the call needs and the key lacks. */
  missingScope: apiKeyScopeSchema.optional(),
});
export type Problem = z.infer<typeof problemSchema>;

/** The `type` URI of each code's problem document. */
export function problemType(code: string): string {
  return `https://idem.dev/problems/${code.toLowerCase().replaceAll('_', '-')}`;
}

/**
 * The dry run (`withdrawals.preview`, `POST /v1/withdrawals/preview`): a withdrawal request, and
 * optionally the key it would be sent with, answered without writing anything.
 */
export const previewWithdrawalInputSchema = z.strictObject({
  request: withdrawalRequestSchema,
  idempotencyKey: idempotencyKeySchema.optional(),
});
export type PreviewWithdrawalInput = z.infer<typeof previewWithdrawalInputSchema>;

/** ALLOW: approved by the policy alone; REVIEW: needs `approvalsRequired` staff; DENY: refused. */
export const previewDecisionSchema = z.enum(['ALLOW', 'REVIEW', 'DENY']);
export type PreviewDecision = z.infer<typeof previewDecisionSchema>;

export const previewWithdrawalOutputSchema = z.object({
  decision: previewDecisionSchema,
  approvalsRequired: z.number().int().min(0),
  /** The rules that matched (the review's flags), or the code a DENY refuses with. */
  reasons: z.array(z.string()),
  /** The account's available balance of the asset now, and what it would be after the hold. */
  availableMinor: minorUnitsSchema,
  balanceAfterMinor: signedAmountMinorSchema,
  /** A freeze in force would hold it: created and reviewed, but not signed until lifted. */
  heldByFreeze: z.boolean(),
  /** The withdrawal id (or the key) is taken: a submit would answer with this one, not create another. */
  alreadySubmitted: z
    .object({ operationId: z.string(), state: operationStateSchema, idempotencyKey: z.string() })
    .nullable(),
});
export type PreviewWithdrawalOutput = z.infer<typeof previewWithdrawalOutputSchema>;
