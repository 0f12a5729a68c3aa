import {
  getWithdrawalByKeyInputSchema,
  getWithdrawalInputSchema,
  IdemError,
  idempotencyKeySchema,
  listWithdrawalsInputSchema,
  listWithdrawalsOutputSchema,
  operationViewSchema,
  submitWithdrawalApiInputSchema,
  submitWithdrawalOutputSchema,
} from '@idem/contracts';
import { findByKey, findByReference, listOperations, submitWithdrawal, toView } from '@idem/core';
import { router, tenantProcedure } from '../trpc.ts';

/**
 * The key comes from the body or the `Idempotency-Key` header. Both may be sent only if they
 * agree: two different keys in one request is a caller bug, not a choice for us to make.
 */
function resolveKey(bodyKey: string | undefined, headerKey: string | null, headerRequired: boolean): string {
  if (headerKey === null && headerRequired) {
    const message = 'the Idempotency-Key header is required';
    throw new IdemError('VALIDATION', message, { issues: [{ path: 'Idempotency-Key', message }] });
  }
  if (headerKey !== null) {
    const parsed = idempotencyKeySchema.safeParse(headerKey);
    if (!parsed.success) {
      const message = parsed.error.issues[0]?.message ?? 'invalid idempotency key';
      throw new IdemError('VALIDATION', message, { issues: [{ path: 'Idempotency-Key', message }] });
    }
    if (bodyKey !== undefined && bodyKey !== parsed.data) {
      const message = 'the Idempotency-Key header and the body idempotencyKey differ';
      throw new IdemError('VALIDATION', message, { issues: [{ path: 'idempotencyKey', message }] });
    }
    return parsed.data;
  }
  if (bodyKey === undefined) {
    const message = 'an idempotency key is required, in the body or the Idempotency-Key header';
    throw new IdemError('VALIDATION', message, { issues: [{ path: 'idempotencyKey', message }] });
  }
  return bodyKey;
}

export const withdrawalsRouter = router({
  /**
   * Creates a withdrawal or replays the one its key created (C01-C06). A withdrawal stored
   * REJECTED for insufficient funds answers INSUFFICIENT_FUNDS, the first time and on every replay,
   * because the rejection is the stored outcome of that key.
   */
  submit: tenantProcedure
    .input(submitWithdrawalApiInputSchema)
    .output(submitWithdrawalOutputSchema)
    .mutation(async ({ ctx, input }) => {
      const idempotencyKey = resolveKey(
        input.idempotencyKey,
        ctx.idempotencyKeyHeader,
        ctx.idempotencyKeyHeaderRequired === true,
      );
      // One statement, its own transaction: the database function binds the tenant and the
      // restricted role itself (migration 0014), like `inTenant` does for every other procedure.
      const claim = await submitWithdrawal(ctx.db, {
        tenantId: ctx.tenantId,
        request: input.request,
        idempotencyKey,
      });
      const operation = claim.operation;
      ctx.state.operationId = operation.operationId;
      ctx.state.outcome = claim.outcome;
      if (operation.state === 'REJECTED' && operation.rejectionCode === 'INSUFFICIENT_FUNDS') {
        throw new IdemError(
          'INSUFFICIENT_FUNDS',
          `withdrawal ${operation.reference} was rejected at intake: insufficient available funds; this key keeps that outcome`,
        );
      }
      return { outcome: claim.outcome, withdrawal: toView(operation) };
    }),

  /** By the integrator's withdrawal id. Another tenant's withdrawal is NOT_FOUND, like a missing one. */
  get: tenantProcedure
    .input(getWithdrawalInputSchema)
    .output(operationViewSchema)
    .query(async ({ ctx, input }) => {
      const found = await ctx.inTenant((tx) =>
        findByReference(tx, ctx.tenantId, 'withdrawal', input.withdrawalId),
      );
      if (!found) throw new IdemError('NOT_FOUND', 'no such withdrawal');
      ctx.state.operationId = found.operationId;
      return toView(found);
    }),

  /**
   * What a key holds (seed 004's `outcome(key)`): the withdrawal it created. A key never used, one
   * refused for another key's withdrawal id, one expired by retention and another tenant's are all
   * NOT_FOUND: a refused claim leaves no trace (C04).
   */
  getByKey: tenantProcedure
    .input(getWithdrawalByKeyInputSchema)
    .output(operationViewSchema)
    .query(async ({ ctx, input }) => {
      const found = await ctx.inTenant((tx) => findByKey(tx, ctx.tenantId, input.idempotencyKey));
      if (found?.kind !== 'withdrawal') throw new IdemError('NOT_FOUND', 'this key holds no withdrawal');
      ctx.state.operationId = found.operationId;
      return toView(found);
    }),

  list: tenantProcedure
    .input(listWithdrawalsInputSchema)
    .output(listWithdrawalsOutputSchema)
    .query(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        listOperations(tx, ctx.tenantId, {
          kind: 'withdrawal',
          limit: input.limit,
          ...(input.state ? { state: input.state } : {}),
          ...(input.cursor ? { cursor: input.cursor } : {}),
        }),
      ),
    ),
});
