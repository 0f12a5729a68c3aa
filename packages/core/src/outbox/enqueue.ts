import { randomUUID } from 'node:crypto';
import { scrubMessage } from '@idem/contracts';
import { and, asc, eq, lte, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { workItems } from '../db/schema/index.ts';

/** Topics of work items. Each is consumed by exactly one kind of worker. */
export type WorkTopic =
  | 'withdrawal.review' // a new withdrawal awaits risk checks and approval
  | 'operation.state_changed' // notify the tenant (outbound webhook) of a transition
  | 'inbox.event' // a verified inbound webhook event awaits processing (C18)
  | 'mail.staff_invitation' // an invitation link awaits sending to the invitee's address
  | 'mail.control_notice'; // a control-change notice awaits e-mailing to one admin

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

/**
 * Locks up to `limit` due pending work items of one topic for the caller's transaction, oldest
 * first; SKIP LOCKED lets concurrent workers take disjoint items.
 */
export async function lockDueWorkItems(tx: Tx, tenantId: string, topic: WorkTopic, limit: number) {
  return tx
    .select()
    .from(workItems)
    .where(
      and(
        eq(workItems.tenantId, tenantId),
        eq(workItems.topic, topic),
        eq(workItems.status, 'pending'),
        lte(workItems.availableAt, sql`now()`),
      ),
    )
    .orderBy(asc(workItems.createdAt))
    .limit(limit)
    .for('update', { skipLocked: true });
}

/** Marks a work item done in the transaction that did its work. */
export async function completeWorkItem(tx: Tx, tenantId: string, workId: string): Promise<void> {
  await tx
    .update(workItems)
    .set({ status: 'done', attempts: sql`${workItems.attempts} + 1` })
    .where(and(eq(workItems.tenantId, tenantId), eq(workItems.workId, workId)));
}

/** After this many failed attempts a work item is dead-lettered for a person. */
export const WORK_ATTEMPTS_MAX = 10;

/** 2 s, 4 s, 8 s ... capped at 10 minutes, after the n-th failed attempt: a failing peer is not hammered. */
export function workRetryDelayMs(attempts: number): number {
  return Math.min(2_000 * 2 ** Math.max(attempts - 1, 0), 600_000);
}

/**
 * Puts a work item whose processing failed back with a growing delay, so one bad item can never
 * block the items behind it; after WORK_ATTEMPTS_MAX it is dead-lettered. Returns whether it died.
 */
export async function deferWorkItem(
  tx: Tx,
  item: { tenantId: string; workId: string; attempts: number },
  error: string,
): Promise<boolean> {
  const attempts = item.attempts + 1;
  const dead = attempts >= WORK_ATTEMPTS_MAX;
  await tx
    .update(workItems)
    .set({
      attempts,
      // Stored text is read by people and tools: it goes through the same scrubbing as logs (C23).
      lastError: scrubMessage(error).slice(0, 300),
      status: dead ? 'dead' : 'pending',
      availableAt: sql`now() + ${workRetryDelayMs(attempts)} * interval '1 millisecond'`,
    })
    .where(and(eq(workItems.tenantId, item.tenantId), eq(workItems.workId, item.workId)));
  return dead;
}
