import { type OperationWebhook, scrubMessage } from '@idem/contracts';
import {
  type AttemptOutcome,
  activeOutboundEndpoints,
  fanOutNotification,
  findOperation,
  leaseDueDeliveries,
  type OutboundEndpoint,
  recordDeliveryAttempt,
  STRICT_EGRESS,
  schema,
  secretsInForce,
  urlRefusal,
  withTenant,
} from '@idem/core';
import { and, eq, lte, sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import type { WorkerContext } from '../context.ts';
import { processWorkItems } from '../work-items.ts';
import { egressPost, egressRefusalOf } from './egress-fetch.ts';

const { workItems } = schema;

const DELIVERY_TIMEOUT_MS = 5_000;
const LEASE_MS = 30_000;

/**
 * Delivers `operation.state_changed` notifications to the tenant's endpoints, signed with Standard
 * Webhooks. Two phases: each raised notification is fanned out into one delivery per endpoint (in
 * the transaction that completes its work item), then due deliveries are sent. Delivery state is
 * per endpoint, so a failing endpoint never causes a redelivery to a healthy one; endpoints are
 * called concurrently, so a slow one never delays the others; one endpoint receives its
 * notifications in the order they were raised. The webhook id (the work item's id) is the same on
 * every attempt, so a receiver deduplicates; each attempt is signed with its own timestamp, so a
 * notification queued through an outage longer than the receiver's tolerance is still accepted.
 */
export async function deliverNotifications(ctx: WorkerContext, tenantId: string): Promise<number> {
  const endpoints = await withTenant(ctx.db, tenantId, (tx) => activeOutboundEndpoints(tx, tenantId));
  const raised =
    endpoints.length === 0 ? await skipUnaddressed(ctx, tenantId) : await fanOut(ctx, tenantId, endpoints);
  return raised + (await sendDue(ctx, tenantId, new Map(endpoints.map((e) => [e.endpointId, e]))));
}

/** Nobody to tell: settle the tenant's due notifications in one statement. */
async function skipUnaddressed(ctx: WorkerContext, tenantId: string): Promise<number> {
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

async function fanOut(
  ctx: WorkerContext,
  tenantId: string,
  endpoints: { endpointId: string }[],
): Promise<number> {
  return processWorkItems(ctx, tenantId, 'operation.state_changed', async (tx, item) => {
    // Written by recordTransition (core), always with these four fields.
    const payload = item.payload as { operationId: string; from: string | null; to: string; version: number };
    const op = await findOperation(tx, tenantId, payload.operationId);
    // What the operator needs to act; never the destination or memo (C23).
    const body: OperationWebhook = {
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
    };
    await fanOutNotification(tx, {
      tenantId,
      workId: item.workId,
      operationId: payload.operationId,
      endpointIds: endpoints.map((e) => e.endpointId),
      body,
    });
  });
}

type Leased = Awaited<ReturnType<typeof leaseDueDeliveries>>[number];

async function sendDue(
  ctx: WorkerContext,
  tenantId: string,
  endpoints: Map<string, OutboundEndpoint>,
): Promise<number> {
  const leased = await leaseDueDeliveries(ctx.db, tenantId, {
    workerId: ctx.workerId,
    limit: ctx.batchSize,
    leaseMs: LEASE_MS,
  });
  const byEndpoint = new Map<string, Leased[]>();
  for (const delivery of leased) {
    byEndpoint.set(delivery.endpointId, [...(byEndpoint.get(delivery.endpointId) ?? []), delivery]);
  }
  await Promise.all(
    [...byEndpoint].map(async ([endpointId, queue]) => {
      const endpoint = endpoints.get(endpointId);
      let blocked = false;
      for (const delivery of queue) {
        // A disabled endpoint, or one that just failed, is not called again this pass: the rest
        // of its queue keeps its order and waits, uncounted.
        if (!endpoint || blocked) {
          await recordDeliveryAttempt(ctx.db, tenantId, delivery, ctx.workerId, { delivered: null });
          continue;
        }
        const { outcome, reason } = await post(
          ctx,
          endpoint,
          delivery.workId,
          delivery.body as OperationWebhook,
        );
        const { dead } = await recordDeliveryAttempt(ctx.db, tenantId, delivery, ctx.workerId, outcome);
        if (outcome.delivered) continue;
        blocked = true;
        const attempt = { tenantId, workId: delivery.workId, endpointId, attempts: delivery.attempts + 1 };
        // Staff see only the generic failure; the reason (a status, a timeout, an egress refusal)
        // is for the people who run the deployment.
        ctx.log.warn(
          { ...attempt, ...reason },
          reason.refused ? 'egress refused' : 'outbound webhook attempt failed',
        );
        if (dead) {
          ctx.log.error(
            { alert: true, ...attempt, lastError: reason.error },
            'ALERT outbound webhook dead-lettered after retries',
          );
        }
      }
    }),
  );
  return leased.length;
}

/** Why an attempt failed, for the worker's log: the host (never the path), and what went wrong. */
interface FailureReason {
  host: string;
  error: string;
  refused: boolean;
}

async function post(
  ctx: WorkerContext,
  endpoint: OutboundEndpoint,
  webhookId: string,
  body: OperationWebhook,
): Promise<{ outcome: AttemptOutcome; reason: FailureReason }> {
  const failed = (error: string, refused = false) => ({
    outcome: { delivered: false } as const,
    reason: { host: hostForLog(endpoint.url), error: scrubMessage(error), refused },
  });
  // The URL's rules again (https outside development): a row saved before them, or under another
  // deployment's settings, is held to this worker's.
  const egress = ctx.egress ?? STRICT_EGRESS;
  const checked = urlRefusal(endpoint.url, egress);
  if ('error' in checked) return failed(checked.error, true);
  const raw = JSON.stringify(body);
  const at = new Date();
  // During a rotation's overlap each attempt carries a signature by each secret in force, space
  // separated as Standard Webhooks allows, so a receiver verifies with whichever it holds.
  const signature = secretsInForce(endpoint, at)
    .map((secret) => new Webhook(secret).sign(webhookId, at, raw))
    .join(' ');
  try {
    const response = await egressPost(endpoint.url, egress, {
      headers: {
        'content-type': 'application/json',
        'webhook-id': webhookId,
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': signature,
      },
      body: raw,
      signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
    });
    await response.body?.cancel();
    if (response.status >= 200 && response.status < 300) {
      return {
        outcome: { delivered: true, responseStatus: response.status },
        reason: { host: '', error: '', refused: false },
      };
    }
    return failed(`HTTP ${response.status}`);
  } catch (error) {
    const refusal = egressRefusalOf(error);
    if (refusal) return failed(refusal.message, true);
    if ((error as Error).name === 'TimeoutError') return failed('timeout');
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return failed(`connection failed: ${cause?.code ?? cause?.message ?? (error as Error).message}`);
  }
}

/** The endpoint's host and port only: a path or query may carry the receiver's own token. */
function hostForLog(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'unparseable url';
  }
}
