import type { OperationWebhook } from '@idem/contracts';
import { activeOutboundEndpoints, findOperation, schema, withTenant, workRetryDelayMs } from '@idem/core';
import { and, asc, eq, isNull, lt, lte, or, sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import type { WorkerContext } from '../context.ts';

const { workItems } = schema;

/** After this many failed attempts a notification is dead-lettered, with an alert. */
export const DELIVERY_ATTEMPTS_MAX = 8;
const DELIVERY_TIMEOUT_MS = 5_000;
const LOCK_MS = 30_000;

/**
 * Delivers `operation.state_changed` notifications to the tenant's endpoints, signed with Standard
 * Webhooks; the work item's id is the webhook id, so a receiver deduplicates redeliveries. The
 * item is leased (not locked) while the HTTP call runs, so no database transaction waits on a
 * remote server. Failures retry with backoff, then dead-letter with an alert.
 */
export async function deliverNotifications(ctx: WorkerContext, tenantId: string): Promise<number> {
  const endpoints = await withTenant(ctx.db, tenantId, (tx) => activeOutboundEndpoints(tx, tenantId));
  if (endpoints.length === 0) {
    // Nobody to tell: settle the tenant's due notifications in one statement.
    const skipped = await withTenant(ctx.db, tenantId, (tx) =>
      tx
        .update(workItems)
        .set({ status: 'skipped', attempts: sql`${workItems.attempts} + 1` })
        .where(
          and(
            eq(workItems.tenantId, tenantId),
            eq(workItems.topic, 'operation.state_changed'),
            eq(workItems.status, 'pending'),
            lte(workItems.availableAt, sql`now()`),
          ),
        )
        .returning({ workId: workItems.workId }),
    );
    return skipped.length;
  }
  const leased = await withTenant(ctx.db, tenantId, async (tx) => {
    const due = await tx
      .select({ workId: workItems.workId })
      .from(workItems)
      .where(
        and(
          eq(workItems.tenantId, tenantId),
          eq(workItems.topic, 'operation.state_changed'),
          eq(workItems.status, 'pending'),
          lte(workItems.availableAt, sql`now()`),
          or(isNull(workItems.lockedUntil), lt(workItems.lockedUntil, sql`now()`)),
        ),
      )
      .orderBy(asc(workItems.createdAt))
      .limit(ctx.batchSize)
      .for('update', { skipLocked: true });
    if (due.length === 0) return { items: [] };
    const items = [];
    for (const { workId } of due) {
      const [item] = await tx
        .update(workItems)
        .set({ lockedBy: ctx.workerId, lockedUntil: sql`now() + ${LOCK_MS} * interval '1 millisecond'` })
        .where(and(eq(workItems.tenantId, tenantId), eq(workItems.workId, workId)))
        .returning();
      if (item) items.push(item);
    }
    return { items };
  });

  for (const item of leased.items) {
    // Written by recordTransition (core), always with these four fields.
    const payload = item.payload as { operationId: string; from: string | null; to: string; version: number };
    const op = await withTenant(ctx.db, tenantId, (tx) => findOperation(tx, tenantId, payload.operationId));
    // What the operator needs to act; never the destination or memo (C23).
    const body = JSON.stringify({
      type: 'operation.state_changed',
      timestamp: item.createdAt.toISOString(),
      data: {
        operationId: payload.operationId,
        kind: op?.kind ?? null,
        reference: op?.reference ?? null,
        accountId: op?.accountRef ?? null,
        asset: op?.assetCode ?? null,
        amountMinor: op?.amountMinor ?? null,
        from: payload.from ?? null,
        to: payload.to,
        version: payload.version,
        owner: op?.owner ?? null,
        txHash: op?.txHash ?? null,
        custodianTransferId: op?.providerRef ?? null,
        custodianTxHash: op?.providerTxHash ?? null,
      },
    } satisfies OperationWebhook);
    const failures: string[] = [];
    for (const endpoint of endpoints) {
      const error = await post(endpoint.url, endpoint.secret, item.workId, item.createdAt, body);
      if (error) failures.push(error);
    }
    if (failures.length === 0) await finish(ctx, tenantId, item.workId, 'done', null, item.attempts);
    else await finish(ctx, tenantId, item.workId, 'retry', failures.join('; ').slice(0, 300), item.attempts);
  }
  return leased.items.length;
}

async function post(
  url: string,
  secret: string,
  webhookId: string,
  at: Date,
  body: string,
): Promise<string | null> {
  const headers = new Webhook(secret).sign(webhookId, at, body);
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': webhookId,
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': headers,
      },
      body,
      signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
      redirect: 'manual',
    });
    await response.body?.cancel();
    return response.status >= 200 && response.status < 300 ? null : `HTTP ${response.status}`;
  } catch (error) {
    return (error as Error).name === 'TimeoutError' ? 'timeout' : 'connection failed';
  }
}

async function finish(
  ctx: WorkerContext,
  tenantId: string,
  workId: string,
  result: 'done' | 'retry',
  lastError: string | null,
  attemptsBefore: number,
): Promise<void> {
  const attempts = attemptsBefore + 1;
  const dead = result === 'retry' && attempts >= DELIVERY_ATTEMPTS_MAX;
  const status = result === 'retry' ? (dead ? 'dead' : 'pending') : result;
  await withTenant(ctx.db, tenantId, (tx) =>
    tx
      .update(workItems)
      .set({
        status,
        attempts,
        lastError,
        lockedBy: null,
        lockedUntil: null,
        ...(status === 'pending'
          ? { availableAt: sql`now() + ${workRetryDelayMs(attempts)} * interval '1 millisecond'` }
          : {}),
      })
      .where(
        and(
          eq(workItems.tenantId, tenantId),
          eq(workItems.workId, workId),
          eq(workItems.lockedBy, ctx.workerId),
        ),
      ),
  );
  if (dead) {
    ctx.log.error(
      { alert: true, tenantId, workId, attempts, lastError },
      'ALERT outbound webhook dead-lettered after retries',
    );
  }
}
