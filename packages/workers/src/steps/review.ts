import { completeWorkItem, getOperation, lockDueWorkItems, reviewWithdrawal, withTenant } from '@idem/core';
import type { WorkerContext } from '../context.ts';

/**
 * Consumes `withdrawal.review` work items: risk review, then system approval or staff review.
 * The item is marked done in the transaction that reviews, so a crash repeats the review, which
 * is idempotent.
 */
export async function reviewPending(ctx: WorkerContext, tenantId: string): Promise<number> {
  return withTenant(ctx.db, tenantId, async (tx) => {
    const items = await lockDueWorkItems(tx, tenantId, 'withdrawal.review', ctx.batchSize);
    for (const item of items) {
      if (item.operationId) {
        const op = await getOperation(tx, tenantId, item.operationId);
        const reviewed = await reviewWithdrawal(tx, op);
        ctx.log.info(
          { tenantId, operationId: op.operationId, state: reviewed.state, flags: reviewed.riskFlags },
          'withdrawal reviewed',
        );
      }
      await completeWorkItem(tx, tenantId, item.workId);
    }
    return items.length;
  });
}
