import type { Network } from '@idem/contracts';
import { assignOwner, type Operation, schema, withTenant } from '@idem/core';
import { and, desc, eq, ne } from 'drizzle-orm';
import { lockOne } from '../candidates.ts';
import type { WorkerContext } from '../context.ts';

const { operationTransitions } = schema;

/**
 * How long a BROADCAST may stay unmined before an alert, then before a named owner, per network.
 * Ethereum blocks come every 12 s, so half an hour unmined means a fee too low or a dropped
 * transaction; the custodian (bitcoin) settles in batches and gets longer.
 */
export const BROADCAST_ALERT_AFTER_MS: Record<Network, number> = {
  ethereum: 30 * 60_000,
  bitcoin: 2 * 60 * 60_000,
};
export const BROADCAST_ESCALATE_AFTER_MS: Record<Network, number> = {
  ethereum: 2 * 60 * 60_000,
  bitcoin: 6 * 60 * 60_000,
};

/**
 * Alerts already raised by this worker process, by operation and the time it entered BROADCAST:
 * the alert is a log line for paging, raised once per stuck broadcast rather than every pass. The
 * durable signals are the metric (`idem_operation_oldest_age_seconds{state="BROADCAST"}`) and the
 * owner assigned at the second age.
 */
const alerted = new WeakMap<WorkerContext, Set<string>>();

/** When the operation last entered BROADCAST (a confirmation undone or an UNKNOWN resolved count). */
async function broadcastSince(ctx: WorkerContext, op: Operation): Promise<Date> {
  const rows = await withTenant(ctx.db, op.tenantId, (tx) =>
    tx
      .select({ at: operationTransitions.createdAt })
      .from(operationTransitions)
      .where(
        and(
          eq(operationTransitions.tenantId, op.tenantId),
          eq(operationTransitions.operationId, op.operationId),
          eq(operationTransitions.toState, 'BROADCAST'),
          ne(operationTransitions.fromState, 'BROADCAST'),
        ),
      )
      .orderBy(desc(operationTransitions.seq))
      .limit(1),
  );
  return rows[0]?.at ?? op.updatedAt;
}

/**
 * A BROADCAST withdrawal that is not mined (pending, dropped and resent, or its rail not answering):
 * past the network's first age an alert, past the second the escalation owner is named (like an
 * UNKNOWN past its window) with an alert. Nothing else changes: the hold stays, the same bytes
 * stay the only transaction.
 */
export async function checkBroadcastAge(
  ctx: WorkerContext,
  op: Operation,
  evidence: Record<string, unknown>,
): Promise<void> {
  if (op.state !== 'BROADCAST' || op.owner) return;
  const network = op.network as Network;
  const alertAfter = ctx.broadcastAlertAfterMs?.[network] ?? BROADCAST_ALERT_AFTER_MS[network];
  const escalateAfter = ctx.broadcastEscalateAfterMs?.[network] ?? BROADCAST_ESCALATE_AFTER_MS[network];
  const since = await broadcastSince(ctx, op);
  const ageMs = ctx.now() - since.getTime();
  const context = { tenantId: op.tenantId, operationId: op.operationId, network, ageSeconds: ageMs / 1000 };
  if (ageMs >= escalateAfter) {
    const escalated = await withTenant(ctx.db, op.tenantId, async (tx) => {
      const current = await lockOne(tx, op.tenantId, op.operationId, 'watch', ctx.reorgWindowSeconds);
      if (!current || current.version !== op.version || current.owner) return false;
      await assignOwner(tx, current, {
        owner: ctx.escalationOwner,
        actor: ctx.workerId,
        reason: `broadcast ${Math.round(ageMs / 1000)}s ago and still not mined; funds stay held`,
        evidence: { ...evidence, broadcastAt: since.toISOString(), escalateAfterMs: escalateAfter },
      });
      return true;
    });
    if (escalated) {
      ctx.log.error(
        { alert: true, ...context, owner: ctx.escalationOwner },
        'ALERT BROADCAST withdrawal not mined: escalated to an owner',
      );
    }
    return;
  }
  if (ageMs < alertAfter) return;
  const seen = alerted.get(ctx) ?? new Set<string>();
  alerted.set(ctx, seen);
  const key = `${op.operationId}:${since.getTime()}`;
  if (seen.has(key)) return;
  seen.add(key);
  ctx.log.error(
    { alert: true, ...context, alertAfterMs: alertAfter, evidence },
    'ALERT BROADCAST withdrawal not mined past its age',
  );
}
