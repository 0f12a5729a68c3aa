import {
  DELIVERY_FAILED,
  type DeliveryListInput,
  deliveryListInputSchema,
  IdemError,
  type OperationWebhook,
  redeliverInputSchema,
  type WebhookDelivery,
} from '@idem/contracts';
import { and, asc, desc, eq, inArray, isNull, lt, lte, or, sql } from 'drizzle-orm';
import type { Database, Tx } from '../db/connect.ts';
import { webhookDeliveries } from '../db/schema/index.ts';
import { withTenant } from '../db/tenant-scope.ts';
import { workRetryDelayMs } from '../outbox/enqueue.ts';
import { decodeSequenceCursor, encodeSequenceCursor } from '../queries/page-cursor.ts';

type DeliveryRow = typeof webhookDeliveries.$inferSelect;

/** After this many failed attempts a delivery is dead-lettered for a person (C15). */
export const DELIVERY_ATTEMPTS_MAX = 8;

/**
 * Turns one raised notification into one pending delivery per endpoint, in the caller's
 * transaction (the one that completes the work item), so a crash repeats the fan-out and the
 * primary key makes the repeat a no-op.
 */
export async function fanOutNotification(
  tx: Tx,
  input: {
    tenantId: string;
    workId: string;
    operationId: string | null;
    endpointIds: string[];
    body: OperationWebhook;
  },
): Promise<void> {
  if (input.endpointIds.length === 0) return;
  await tx
    .insert(webhookDeliveries)
    .values(
      input.endpointIds.map((endpointId) => ({
        tenantId: input.tenantId,
        workId: input.workId,
        endpointId,
        operationId: input.operationId,
        body: input.body,
      })),
    )
    .onConflictDoNothing();
}

/**
 * Leases due deliveries (oldest raised first) for `leaseMs`, so no transaction stays open while a
 * remote server answers; a worker that dies mid-call leaves a lease that expires.
 */
export async function leaseDueDeliveries(
  db: Database,
  tenantId: string,
  input: { workerId: string; limit: number; leaseMs: number },
): Promise<DeliveryRow[]> {
  return withTenant(db, tenantId, async (tx) => {
    const due = await tx
      .select({ workId: webhookDeliveries.workId, endpointId: webhookDeliveries.endpointId })
      .from(webhookDeliveries)
      .where(
        and(
          eq(webhookDeliveries.tenantId, tenantId),
          eq(webhookDeliveries.status, 'pending'),
          lte(webhookDeliveries.availableAt, sql`now()`),
          or(isNull(webhookDeliveries.lockedUntil), lt(webhookDeliveries.lockedUntil, sql`now()`)),
        ),
      )
      .orderBy(asc(webhookDeliveries.sequence))
      .limit(input.limit)
      .for('update', { skipLocked: true });
    if (due.length === 0) return [];
    const leased = await tx
      .update(webhookDeliveries)
      .set({
        lockedBy: input.workerId,
        lockedUntil: sql`now() + ${input.leaseMs} * interval '1 millisecond'`,
      })
      .where(
        and(
          eq(webhookDeliveries.tenantId, tenantId),
          or(
            ...due.map((d) =>
              and(eq(webhookDeliveries.workId, d.workId), eq(webhookDeliveries.endpointId, d.endpointId)),
            ),
          ),
        ),
      )
      .returning();
    return leased.sort((a, b) => (a.sequence < b.sequence ? -1 : 1));
  });
}

/**
 * The outcome of one attempt, as staff may see it: a failure is recorded as DELIVERY_FAILED with no
 * status, whatever the sender saw (its reason goes to the worker's log).
 */
export type AttemptOutcome =
  | { delivered: true; responseStatus: number }
  | { delivered: false }
  | { delivered: null }; // not attempted this pass: the lease is released, nothing counted

/**
 * Records one attempt under the sender's lease. Returns whether the delivery is now dead-lettered.
 * A lease another worker has taken over changes nothing.
 */
export async function recordDeliveryAttempt(
  db: Database,
  tenantId: string,
  delivery: Pick<DeliveryRow, 'workId' | 'endpointId' | 'attempts' | 'manualRedeliveries'>,
  workerId: string,
  outcome: AttemptOutcome,
): Promise<{ dead: boolean }> {
  const mine = and(
    eq(webhookDeliveries.tenantId, tenantId),
    eq(webhookDeliveries.workId, delivery.workId),
    eq(webhookDeliveries.endpointId, delivery.endpointId),
    eq(webhookDeliveries.lockedBy, workerId),
    eq(webhookDeliveries.status, 'pending'),
  );
  const released = { lockedBy: null, lockedUntil: null };
  if (outcome.delivered === null) {
    await withTenant(db, tenantId, (tx) => tx.update(webhookDeliveries).set(released).where(mine));
    return { dead: false };
  }
  const attempts = delivery.attempts + 1;
  if (outcome.delivered) {
    await withTenant(db, tenantId, (tx) =>
      tx
        .update(webhookDeliveries)
        .set({
          ...released,
          status: 'done',
          attempts,
          lastResponseStatus: outcome.responseStatus,
          lastError: null,
          lastAttemptAt: sql`now()`,
          deliveredAt: sql`now()`,
        })
        .where(mine),
    );
    return { dead: false };
  }
  const dead = attempts >= DELIVERY_ATTEMPTS_MAX;
  await withTenant(db, tenantId, (tx) =>
    tx
      .update(webhookDeliveries)
      .set({
        ...released,
        status: dead ? 'dead' : 'pending',
        attempts,
        lastResponseStatus: null,
        lastError: DELIVERY_FAILED,
        lastAttemptAt: sql`now()`,
        // An operator who asked for a retry while this attempt was under way (the receiver is back)
        // gets it now, once: the next lease reads the new count, and its failure backs off again.
        ...(dead
          ? {}
          : {
              availableAt: sql`case when ${webhookDeliveries.manualRedeliveries} > ${delivery.manualRedeliveries}
                then now() else now() + ${workRetryDelayMs(attempts)} * interval '1 millisecond' end`,
            }),
      })
      .where(mine),
  );
  return { dead };
}

/** The delivery log, newest first, filtered by status, endpoint or operation. */
export async function listDeliveries(
  tx: Tx,
  tenantId: string,
  rawInput: DeliveryListInput,
): Promise<{ items: WebhookDelivery[]; nextCursor: string | null }> {
  const parsed = deliveryListInputSchema.safeParse(rawInput);
  if (!parsed.success) {
    throw new IdemError('VALIDATION', parsed.error.issues[0]?.message ?? 'invalid delivery filter');
  }
  const input = parsed.data;
  const before = input.cursor ? decodeSequenceCursor(input.cursor) : null;
  const rows = await tx
    .select()
    .from(webhookDeliveries)
    .where(
      and(
        eq(webhookDeliveries.tenantId, tenantId),
        input.status ? eq(webhookDeliveries.status, input.status) : undefined,
        input.endpointId ? eq(webhookDeliveries.endpointId, input.endpointId) : undefined,
        input.operationId ? eq(webhookDeliveries.operationId, input.operationId) : undefined,
        before !== null ? lt(webhookDeliveries.sequence, before) : undefined,
      ),
    )
    .orderBy(desc(webhookDeliveries.sequence))
    .limit(input.limit + 1);
  const page = rows.slice(0, input.limit);
  const last = page.at(-1);
  return {
    items: page.map(deliveryView),
    nextCursor: rows.length > input.limit && last ? encodeSequenceCursor(last.sequence) : null,
  };
}

/**
 * Queues a delivery again by hand (a receiver lost it, or it was dead-lettered during an outage):
 * the same webhook id and body, a fresh round of attempts. A pending one is made due now; one being
 * attempted keeps its sender, and is retried at once if that attempt fails.
 */
export async function redeliver(
  tx: Tx,
  tenantId: string,
  rawInput: { workId: string; endpointId: string },
): Promise<WebhookDelivery> {
  const parsed = redeliverInputSchema.safeParse(rawInput);
  if (!parsed.success)
    throw new IdemError('VALIDATION', parsed.error.issues[0]?.message ?? 'invalid delivery');
  const { workId, endpointId } = parsed.data;
  const key = and(
    eq(webhookDeliveries.tenantId, tenantId),
    eq(webhookDeliveries.workId, workId),
    eq(webhookDeliveries.endpointId, endpointId),
  );
  const [requeued] = await tx
    .update(webhookDeliveries)
    .set({
      status: 'pending',
      attempts: 0,
      availableAt: sql`now()`,
      lockedBy: null,
      lockedUntil: null,
      manualRedeliveries: sql`${webhookDeliveries.manualRedeliveries} + 1`,
    })
    .where(and(key, inArray(webhookDeliveries.status, ['done', 'dead'])))
    .returning();
  if (requeued) return deliveryView(requeued);
  // A pending delivery is made due now (the receiver is back and the operator will not wait out
  // the backoff); its attempts still count toward the dead letter. The request is recorded even
  // when the row is already due or under a sender's lease: that sender keeps it, and if its attempt
  // fails the next one is due at once (recordDeliveryAttempt compares the count it leased).
  const [retried] = await tx
    .update(webhookDeliveries)
    .set({
      availableAt: sql`least(${webhookDeliveries.availableAt}, now())`,
      manualRedeliveries: sql`${webhookDeliveries.manualRedeliveries} + 1`,
    })
    .where(and(key, eq(webhookDeliveries.status, 'pending')))
    .returning();
  if (retried) return deliveryView(retried);
  const [current] = await tx.select().from(webhookDeliveries).where(key);
  if (!current) throw new IdemError('NOT_FOUND', 'no such delivery');
  return deliveryView(current);
}

function deliveryView(row: DeliveryRow): WebhookDelivery {
  const body = row.body as OperationWebhook;
  return {
    workId: row.workId,
    endpointId: row.endpointId,
    operationId: row.operationId,
    event: body.data,
    status: row.status,
    attempts: row.attempts,
    // Rows written before failures were recorded generically may hold a status or reason: shown as
    // the generic failure too.
    lastResponseStatus:
      row.lastResponseStatus !== null && row.lastResponseStatus >= 200 && row.lastResponseStatus < 300
        ? row.lastResponseStatus
        : null,
    lastError: row.lastError === null ? null : DELIVERY_FAILED,
    lastAttemptAt: row.lastAttemptAt?.toISOString() ?? null,
    nextAttemptAt: row.status === 'pending' ? row.availableAt.toISOString() : null,
    deliveredAt: row.deliveredAt?.toISOString() ?? null,
    manualRedeliveries: row.manualRedeliveries,
    createdAt: row.createdAt.toISOString(),
  };
}
