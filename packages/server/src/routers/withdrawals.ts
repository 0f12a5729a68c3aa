import {
  getWithdrawalByKeyInputSchema,
  getWithdrawalInputSchema,
  IdemError,
  idempotencyKeySchema,
  listWithdrawalsInputSchema,
  listWithdrawalsOutputSchema,
  operationViewSchema,
  previewWithdrawalInputSchema,
  previewWithdrawalOutputSchema,
  type SubmitWithdrawalOutput,
  scrubMessage,
  submitWithdrawalApiInputSchema,
  submitWithdrawalOutputSchema,
  submitWithdrawalsEnvelopeSchema,
  submitWithdrawalsOutputSchema,
  type WithdrawalBatchItemError,
  type WithdrawalBatchResult,
  withdrawalBatchItemSchema,
} from '@idem/contracts';
import {
  findByKey,
  findByReference,
  type IdentityClaim,
  type ItemOutcome,
  listOperations,
  previewWithdrawal,
  submitWithdrawal,
  submitWithdrawals,
  toView,
} from '@idem/core';
import type { Logger } from 'pino';
import { asIdemError } from '../errors.ts';
import { apiProcedure, router } from '../trpc.ts';

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

/**
 * A claim as the caller sees it. A withdrawal stored REJECTED for insufficient funds answers
 * INSUFFICIENT_FUNDS, the first time and on every replay: the rejection is that key's outcome.
 */
function answerFor(claim: IdentityClaim): SubmitWithdrawalOutput {
  const operation = claim.operation;
  if (operation.state === 'REJECTED' && operation.rejectionCode === 'INSUFFICIENT_FUNDS') {
    throw new IdemError(
      'INSUFFICIENT_FUNDS',
      `withdrawal ${operation.reference} was rejected at intake: insufficient available funds; this key keeps that outcome`,
    );
  }
  return { outcome: claim.outcome, withdrawal: toView(operation) };
}

/**
 * One item's answer. A refusal is shaped as the single call's problem is (asIdemError), so an
 * unexpected fault is INTERNAL with a fixed message, logged here since no error formatter sees it.
 */
function resultFor(outcome: ItemOutcome, log: Logger, requestId: string): WithdrawalBatchResult {
  let cause: unknown;
  if (outcome.ok) {
    try {
      return answerFor(outcome.claim);
    } catch (error) {
      cause = error;
    }
  } else {
    cause = outcome.error;
  }
  const error = asIdemError(cause);
  if (error.code === 'INTERNAL' && !(cause instanceof IdemError)) {
    log.error({ requestId, err: scrubMessage(String(cause)) }, 'batch item failed');
  }
  const answer: WithdrawalBatchItemError = { code: error.code, message: error.message };
  if (error.details.holderKey !== undefined) answer.holderKey = error.details.holderKey;
  if (error.details.retryAfterMs !== undefined) answer.retryAfterMs = error.details.retryAfterMs;
  if (error.details.issues !== undefined) answer.issues = error.details.issues;
  return { error: answer };
}

export const withdrawalsRouter = router({
  /**
   * Creates a withdrawal or replays the one its key created (C01-C06). A withdrawal stored
   * REJECTED for insufficient funds answers INSUFFICIENT_FUNDS, the first time and on every replay,
   * because the rejection is the stored outcome of that key.
   */
  submit: apiProcedure('withdraw')
    .input(submitWithdrawalApiInputSchema)
    .output(submitWithdrawalOutputSchema)
    .mutation(async ({ ctx, input }) => {
      const idempotencyKey = resolveKey(
        input.idempotencyKey,
        ctx.idempotencyKeyHeader,
        ctx.idempotencyKeyHeaderRequired === true,
      );
      // One statement, its own transaction: the database function binds the tenant and the
      // restricted role itself (core/sql/idem_create_withdrawal.sql), like `inTenant` does for
      // every other procedure.
      const claim = await submitWithdrawal(ctx.db, {
        tenantId: ctx.tenantId,
        request: input.request,
        idempotencyKey,
        actor: ctx.actor,
      });
      ctx.state.operationId = claim.operation.operationId;
      ctx.state.outcome = claim.outcome;
      return answerFor(claim);
    }),

  /**
   * The bulk API: up to 1,000 withdrawals, each with its own key, answered per item in
   * the order given, each as `submit` would answer it. Items are validated one by one, so a
   * malformed item is that item's VALIDATION and writes nothing for it; the valid ones are written
   * by one statement. Retrying the whole call is safe: every item replays by its key. Costs one
   * rate-limit token per item.
   */
  submitMany: apiProcedure('withdraw')
    .input(submitWithdrawalsEnvelopeSchema)
    .output(submitWithdrawalsOutputSchema)
    .mutation(async ({ ctx, input }) => {
      // The middleware took one token for the call; the other items pay theirs here.
      const waitMs = input.items.length > 1 ? ctx.rateLimiter.take(ctx.tenantId, input.items.length - 1) : 0;
      if (waitMs > 0) {
        throw new IdemError(
          'RATE_LIMITED',
          'too many requests for this tenant (a batch costs one per item)',
          {
            retryAfterMs: waitMs,
          },
        );
      }
      const parsed = input.items.map((item) => withdrawalBatchItemSchema.safeParse(item));
      const valid = parsed.flatMap((entry) => (entry.success ? [entry.data] : []));
      const written = await submitWithdrawals(ctx.db, {
        tenantId: ctx.tenantId,
        items: valid,
        actor: ctx.actor,
      });
      let next = 0;
      const outcomes: ItemOutcome[] = parsed.map((entry) =>
        entry.success
          ? (written[next++] as ItemOutcome)
          : {
              ok: false,
              error: new IdemError(
                'VALIDATION',
                entry.error.issues.map((issue) => issue.message).join('; '),
                {
                  issues: entry.error.issues.map((issue) => ({
                    path: issue.path.map(String).join('.'),
                    message: issue.message,
                  })),
                },
              ),
            },
      );
      const results = outcomes.map((outcome) => resultFor(outcome, ctx.log, ctx.requestId));
      // The statement never answered: no item's outcome is known, so the call is UNAVAILABLE as a
      // single submission would be (503, retry the same batch), not a 200 of unknowns.
      const failures = results.flatMap((result) => ('error' in result ? [result.error] : []));
      if (failures.length === results.length && failures.every((error) => error.code === 'UNAVAILABLE')) {
        throw asIdemError(outcomes.find((outcome) => !outcome.ok)?.error);
      }
      const counts: Record<string, number> = {};
      for (const result of results) {
        const outcome = 'error' in result ? result.error.code : result.outcome;
        counts[outcome] = (counts[outcome] ?? 0) + 1;
      }
      ctx.state.outcomes = counts;
      return { results };
    }),

  /**
   * The dry run: the decision the policy would make for this request now (ALLOW, REVIEW with N
   * approvers, DENY with a code), the balance after, whether a freeze would hold it and whether its
   * id is taken. Writes nothing: the key and the withdrawal id stay free. Needs the scope a
   * submission needs, since it tells what a submission would get.
   */
  preview: apiProcedure('withdraw')
    .input(previewWithdrawalInputSchema)
    .output(previewWithdrawalOutputSchema)
    .mutation(({ ctx, input }) =>
      previewWithdrawal(ctx.db, {
        tenantId: ctx.tenantId,
        request: input.request,
        idempotencyKey: input.idempotencyKey,
      }),
    ),

  /** By the integrator's withdrawal id. Another tenant's withdrawal is NOT_FOUND, like a missing one. */
  get: apiProcedure('read')
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
  getByKey: apiProcedure('read')
    .input(getWithdrawalByKeyInputSchema)
    .output(operationViewSchema)
    .query(async ({ ctx, input }) => {
      const found = await ctx.inTenant((tx) => findByKey(tx, ctx.tenantId, input.idempotencyKey));
      if (found?.kind !== 'withdrawal') throw new IdemError('NOT_FOUND', 'this key holds no withdrawal');
      ctx.state.operationId = found.operationId;
      return toView(found);
    }),

  list: apiProcedure('read')
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
