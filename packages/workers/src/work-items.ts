import { scrubbedError } from '@idem/contracts';
import {
  completeWorkItem,
  deferWorkItem,
  lockDueWorkItems,
  type schema,
  type Tx,
  type WorkTopic,
  withTenant,
} from '@idem/core';
import type { WorkerContext } from './context.ts';

type WorkItem = typeof schema.workItems.$inferSelect;

/**
 * Runs `handle` for each due work item of a topic, each in its own savepoint: an item that fails
 * is rolled back and put back with a growing delay (dead-lettered with an alert after its last
 * attempt) while the items behind it proceed. A handled item is completed in the same transaction
 * as its effects, so a crash repeats it, and handlers are idempotent.
 */
export async function processWorkItems(
  ctx: Pick<WorkerContext, 'db' | 'log' | 'batchSize'>,
  tenantId: string,
  topic: WorkTopic,
  handle: (tx: Tx, item: WorkItem) => Promise<void>,
): Promise<number> {
  return withTenant(ctx.db, tenantId, async (tx) => {
    const items = await lockDueWorkItems(tx, tenantId, topic, ctx.batchSize);
    for (const item of items) {
      try {
        await tx.transaction((savepoint) => handle(savepoint, item));
        await completeWorkItem(tx, tenantId, item.workId);
      } catch (error) {
        const message = scrubbedError(error, 300);
        const dead = await deferWorkItem(tx, item, message);
        ctx.log[dead ? 'error' : 'warn'](
          { alert: dead, tenantId, topic, workId: item.workId, attempts: item.attempts + 1, message },
          dead ? 'ALERT work item dead-lettered after repeated failures' : 'work item failed; retrying later',
        );
      }
    }
    return items.length;
  });
}
