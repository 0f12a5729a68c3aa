import { randomUUID } from 'node:crypto';
import type { Tx } from '../db/connect.ts';
import { workItems } from '../db/schema/index.ts';

/** Topics of work items. Each is consumed by exactly one kind of worker. */
export type WorkTopic =
  | 'withdrawal.review' // a new withdrawal awaits risk checks and approval
  | 'operation.state_changed' // notify the tenant (outbound webhook) of a transition
  | 'inbox.event'; // a verified inbound webhook event awaits processing (C18)

/** Writes a work item in the caller's transaction: it commits with the change or not at all. */
export async function enqueue(
  tx: Tx,
  item: { tenantId: string; topic: WorkTopic; operationId?: string; payload: Record<string, unknown> },
): Promise<string> {
  const workId = randomUUID();
  await tx.insert(workItems).values({
    tenantId: item.tenantId,
    workId,
    topic: item.topic,
    operationId: item.operationId ?? null,
    payload: item.payload,
  });
  return workId;
}
