import { z } from 'zod';
import { errorCodeList } from './errors.ts';
import { idempotencyKeySchema, referenceSchema } from './key.ts';
import {
  operationStateSchema,
  operationViewSchema,
  submitOutcomeSchema,
  withdrawalRequestSchema,
} from './operation.ts';

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

export const getWithdrawalInputSchema = z.strictObject({ withdrawalId: referenceSchema });

export const LIST_PAGE_SIZE_MAX = 100;
export const listWithdrawalsInputSchema = z.strictObject({
  state: operationStateSchema.optional(),
  cursor: z.string().min(1).max(200).optional(),
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
  cursor: z.string().min(1).max(200).optional(),
  limit: z.number().int().min(1).max(LIST_PAGE_SIZE_MAX).default(50),
});
export type ListDepositsInput = z.input<typeof listDepositsInputSchema>;
export const listDepositsOutputSchema = operationPageSchema;
export type ListDepositsOutput = z.infer<typeof listDepositsOutputSchema>;

export const getBalancesInputSchema = z.strictObject({ accountId: referenceSchema });

const minorUnits = z.string().regex(/^[0-9]+$/);
export const balanceViewSchema = z.object({ asset: z.string(), available: minorUnits, held: minorUnits });
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
});
export type Problem = z.infer<typeof problemSchema>;

/** The `type` URI of each code's problem document. */
export function problemType(code: string): string {
  return `https://idem.dev/problems/${code.toLowerCase().replaceAll('_', '-')}`;
}
