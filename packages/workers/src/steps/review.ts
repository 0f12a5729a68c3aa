import { getOperation, reviewWithdrawal } from '@idem/core';
import type { WorkerContext } from '../context.ts';
import { processWorkItems } from '../work-items.ts';

/**
 * Consumes `withdrawal.review` work items: risk review, then system approval or staff review.
 * The item is marked done in the transaction that reviews, so a crash repeats the review, which
 * is idempotent.
 */
export async function reviewPending(ctx: WorkerContext, tenantId: string): Promise<number> {
  return processWorkItems(ctx, tenantId, 'withdrawal.review', async (tx, item) => {
    if (!item.operationId) return;
    const op = await getOperation(tx, tenantId, item.operationId);
    const reviewed = await reviewWithdrawal(tx, op);
    ctx.log.info(
      { tenantId, operationId: op.operationId, state: reviewed.state, flags: reviewed.riskFlags },
      'withdrawal reviewed',
    );
  });
}
