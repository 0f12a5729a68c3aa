import type { Database } from '@idem/core';
import type { Logger } from 'pino';
import { tenantsWithWork } from './candidates.ts';
import type { SendStep, WorkerContext } from './context.ts';
import type { RailRegistry } from './rails.ts';
import { reconcileTenant } from './reconciliation.ts';
import { deliverNotifications } from './steps/deliver.ts';
import { watchDeposits } from './steps/deposits.ts';
import { dispatchApproved, resumeSigned } from './steps/dispatch.ts';
import { processInbox } from './steps/inbox.ts';
import { reviewPending } from './steps/review.ts';
import { recheckConfirmed, reconcileUnknown, watchBroadcast } from './steps/settle.ts';

export interface WorkerOptions {
  db: Database;
  rails: RailRegistry;
  log: Logger;
  workerId: string;
  leaseMs?: number;
  batchSize?: number;
  reorgWindowSeconds?: number;
  unknownEscalateAfterMs?: number;
  escalationOwner?: string;
  probe?: (step: SendStep, operationId: string) => Promise<void>;
  /** Run three-way reconciliation per tenant at most this often (off when absent). */
  reconcileEveryMs?: number;
}

export interface TickReport {
  tenants: number;
  reviewed: number;
  inbound: number;
  dispatched: number;
  resumed: number;
  watched: number;
  reconciled: number;
  rechecked: number;
  delivered: number;
  depositsObserved: number;
  breaksOpened: number;
}

export interface Worker {
  /** One pass over every tenant with work. Safe to run from many processes at once. */
  runOnce(): Promise<TickReport>;
  /** Runs passes every `intervalMs` until `stop`. */
  start(intervalMs: number): void;
  stop(): Promise<void>;
}

export function createWorker(options: WorkerOptions): Worker {
  const ctx: WorkerContext = {
    db: options.db,
    rails: options.rails,
    log: options.log.child({ workerId: options.workerId }),
    workerId: options.workerId,
    leaseMs: options.leaseMs ?? 30_000,
    batchSize: options.batchSize ?? 20,
    reorgWindowSeconds: options.reorgWindowSeconds ?? 3_600,
    unknownEscalateAfterMs: options.unknownEscalateAfterMs ?? 15 * 60_000,
    escalationOwner: options.escalationOwner ?? 'ops-oncall',
    ...(options.probe ? { probe: options.probe } : {}),
  };

  const lastReconciled = new Map<string, number>();

  async function runOnce(): Promise<TickReport> {
    const report: TickReport = {
      tenants: 0,
      reviewed: 0,
      inbound: 0,
      dispatched: 0,
      resumed: 0,
      watched: 0,
      reconciled: 0,
      rechecked: 0,
      delivered: 0,
      depositsObserved: 0,
      breaksOpened: 0,
    };
    const tenants = await tenantsWithWork(ctx.db, ctx.reorgWindowSeconds);
    report.tenants = tenants.length;
    for (const tenantId of tenants) {
      report.reviewed += await reviewPending(ctx, tenantId);
      report.inbound += await processInbox(ctx, tenantId);
      report.resumed += await resumeSigned(ctx, tenantId);
      report.dispatched += await dispatchApproved(ctx, tenantId);
      report.watched += await watchBroadcast(ctx, tenantId);
      report.reconciled += await reconcileUnknown(ctx, tenantId);
      report.rechecked += await recheckConfirmed(ctx, tenantId);
      report.delivered += await deliverNotifications(ctx, tenantId);
      // A node that cannot be asked is no evidence: deposits wait for the next pass.
      report.depositsObserved += await watchDeposits(ctx, tenantId).catch((error: unknown) => {
        ctx.log.warn(
          { tenantId, message: String((error as Error).message).slice(0, 200) },
          'deposit scan skipped',
        );
        return 0;
      });
      if (
        options.reconcileEveryMs !== undefined &&
        Date.now() - (lastReconciled.get(tenantId) ?? 0) >= options.reconcileEveryMs
      ) {
        lastReconciled.set(tenantId, Date.now());
        report.breaksOpened += (await reconcileTenant(ctx, tenantId)).breaksOpened;
      }
    }
    return report;
  }

  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  return {
    runOnce,
    start(intervalMs) {
      const tick = () => {
        if (stopped) return;
        running = runOnce()
          .catch((error: unknown) =>
            ctx.log.error({ message: String((error as Error).message).slice(0, 300) }, 'worker pass failed'),
          )
          .finally(() => {
            if (!stopped) timer = setTimeout(tick, intervalMs);
          });
      };
      tick();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
