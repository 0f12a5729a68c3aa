import { getOperation, reviewWithdrawal, schema, withTenant } from '@idem/core';
import { and, asc, eq, lte, sql } from 'drizzle-orm';
import type { WorkerContext } from '../context.ts';

const { workItems } = schema;

/**
 * Consumes `withdrawal.review` work items: risk review, then system approval or staff review.
 * The item is marked done in the transaction that reviews, so a crash repeats the review, which
 * is idempotent.
 */
export async function reviewPending(ctx: WorkerContext, tenantId: string): Promise<number> {
  return withTenant(ctx.db, tenantId, async (tx) => {
    const items = await tx
      .select()
      .from(workItems)
      .where(
        and(
          eq(workItems.tenantId, tenantId),
          eq(workItems.topic, 'withdrawal.review'),
          eq(workItems.status, 'pending'),
          lte(workItems.availableAt, sql`now()`),
        ),
      )
      .orderBy(asc(workItems.createdAt))
      .limit(ctx.batchSize)
      .for('update', { skipLocked: true });
    for (const item of items) {
      if (item.operationId) {
        const op = await getOperation(tx, tenantId, item.operationId);
        const reviewed = await reviewWithdrawal(tx, op);
        ctx.log.info(
          { tenantId, operationId: op.operationId, state: reviewed.state, flags: reviewed.riskFlags },
          'withdrawal reviewed',
        );
      }
      await tx
        .update(workItems)
        .set({ status: 'done', attempts: sql`${workItems.attempts} + 1` })
        .where(and(eq(workItems.tenantId, tenantId), eq(workItems.workId, item.workId)));
    }
    return items.length;
  });
}
