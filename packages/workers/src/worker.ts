import { scrubbedError } from '@idem/contracts';
import { allTenantIds, type Database } from '@idem/core';
import type { Logger } from 'pino';
import type { CustodianAccountPass } from './balance-reconciliation/custodian.ts';
import { reconcileBalances } from './balance-reconciliation/run.ts';
import { tenantsWithWork, visitOrder } from './candidates.ts';
import type { SendStep, WorkerContext } from './context.ts';
import type { RailRegistry } from './rails.ts';
import { reconcileTenant } from './reconciliation.ts';
import { CUSTODIAN_POLL_EVERY_MS_DEFAULT, pollCustodian } from './steps/custodian-poll.ts';
import { deliverNotifications } from './steps/deliver.ts';
import { watchDeposits } from './steps/deposits.ts';
import { dispatchApproved, resumeSigned } from './steps/dispatch.ts';
import { processInbox } from './steps/inbox.ts';
import { DEFAULT_REPLACE_POLICIES, type ReplacePolicy, replaceStuck } from './steps/replace.ts';
import { expireSettledKeys, KEY_RETENTION_RUN_EVERY_MS } from './steps/retention.ts';
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
  /** The least time between the two chain passes a VERIFIED_NOT_SENT verdict needs (default 60 s). */
  notSentConfirmIntervalMs?: number;
  escalationOwner?: string;
  broadcastAlertAfterMs?: WorkerContext['broadcastAlertAfterMs'];
  broadcastEscalateAfterMs?: WorkerContext['broadcastEscalateAfterMs'];
  probe?: (step: SendStep, operationId: string) => Promise<void>;
  /** Run three-way reconciliation per tenant at most this often (off when absent). */
  reconcileEveryMs?: number;
  /** Ask the custodian for missed deposits and statuses per tenant at most this often (default 30 s). */
  custodianPollEveryMs?: number;
  /** Run idempotency-key retention per tenant at most this often (default hourly). */
  expireKeysEveryMs?: number;
  /** Automatic fee bumps of stuck withdrawals, per network (defaults: DEFAULT_REPLACE_POLICIES). */
  replacePolicies?: Record<string, ReplacePolicy>;
  /**
   * A pass still running after this long is reported once as an ALERT naming its stage and tenant
   * (default 5 minutes): a worker whose pass never ends moves nothing, and says nothing otherwise.
   */
  stallAlertMs?: number;
}

export interface TickReport {
  tenants: number;
  reviewed: number;
  inbound: number;
  dispatched: number;
  resumed: number;
  watched: number;
  replaced: number;
  reconciled: number;
  rechecked: number;
  delivered: number;
  depositsObserved: number;
  /** Events the custodian poller found that no webhook had brought (recorded in the inbox). */
  custodianEventsRecovered: number;
  breaksOpened: number;
  keysExpired: number;
}

export interface Worker {
  /** One pass over every tenant with work. Safe to run from many processes at once. */
  runOnce(): Promise<TickReport>;
  /** Runs passes every `intervalMs` until `stop`. */
  start(intervalMs: number): void;
  /** Resolves once the work a pass started beside itself (balance reconciliation) has finished. */
  idle(): Promise<void>;
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
    notSentConfirmIntervalMs: options.notSentConfirmIntervalMs ?? 60_000,
    escalationOwner: options.escalationOwner ?? 'ops-oncall',
    ...(options.broadcastAlertAfterMs ? { broadcastAlertAfterMs: options.broadcastAlertAfterMs } : {}),
    ...(options.broadcastEscalateAfterMs
      ? { broadcastEscalateAfterMs: options.broadcastEscalateAfterMs }
      : {}),
    ...(options.probe ? { probe: options.probe } : {}),
    replacePolicies: { ...DEFAULT_REPLACE_POLICIES, ...options.replacePolicies },
  };

  /** When each periodic job last ran, per tenant. */
  const lastRun = new Map<string, number>();
  const due = (job: string, tenantId: string, everyMs: number | undefined): boolean => {
    if (everyMs === undefined) return false;
    const key = `${job}:${tenantId}`;
    if (Date.now() - (lastRun.get(key) ?? 0) < everyMs) return false;
    lastRun.set(key, Date.now());
    return true;
  };

  /**
   * One stage for one tenant. A stage that fails (a node or custodian that cannot be asked, a
   * database hiccup) is logged and skipped for this pass: it is no evidence of anything, and the
   * other stages and tenants go on. Every stage is safe to repeat on the next pass.
   */
  async function stage(name: string, tenantId: string, work: () => Promise<number>): Promise<number> {
    pass.stage = name;
    pass.tenantId = tenantId;
    try {
      return await work();
    } catch (error) {
      ctx.log.warn({ tenantId, stage: name, message: scrubbedError(error, 200) }, 'stage skipped');
      return 0;
    }
  }

  /**
   * Balance-level reconciliation reads many balances and receipts from the node and the custodian;
   * a slow or hanging node must not hold up the stages that move money. So it runs beside the
   * passes, one job at a time: tenants that come due while a job runs wait for the next pass.
   */
  let balanceJob: Promise<void> | null = null;
  function startBalanceReconciliation(tenantIds: string[]): void {
    if (balanceJob) {
      for (const tenantId of tenantIds) lastRun.delete(`balance-reconciliation:${tenantId}`);
      return;
    }
    // A shared custodian account is observed once per job for all of its tenants.
    const accountPasses = new Map<string, Promise<CustodianAccountPass>>();
    balanceJob = (async () => {
      for (const tenantId of tenantIds) {
        await stage(
          'balance-reconciliation',
          tenantId,
          async () =>
            (
              await reconcileBalances(ctx, tenantId, {
                ranBy: `worker:${ctx.workerId}`,
                trigger: 'schedule',
                accountPasses,
              })
            ).breaksOpened,
        );
      }
    })().finally(() => {
      balanceJob = null;
    });
  }

  /** Where the running pass is, for the stall alert (one pass at a time runs under start()). */
  const pass = { startedAt: 0, stage: 'tenants', tenantId: '', alerted: false };

  async function runOnce(): Promise<TickReport> {
    Object.assign(pass, { startedAt: Date.now(), stage: 'tenants', tenantId: '', alerted: false });
    const report: TickReport = {
      tenants: 0,
      reviewed: 0,
      inbound: 0,
      dispatched: 0,
      resumed: 0,
      watched: 0,
      replaced: 0,
      reconciled: 0,
      rechecked: 0,
      delivered: 0,
      depositsObserved: 0,
      custodianEventsRecovered: 0,
      breaksOpened: 0,
      keysExpired: 0,
    };
    const tenants = visitOrder(await tenantsWithWork(ctx.db, ctx.reorgWindowSeconds));
    report.tenants = tenants.length;
    const balanceDue: string[] = [];
    for (const tenantId of tenants) {
      report.reviewed += await stage('review', tenantId, () => reviewPending(ctx, tenantId));
      // Before the inbox, so what the poll finds is applied in the same pass.
      if (due('custodian-poll', tenantId, options.custodianPollEveryMs ?? CUSTODIAN_POLL_EVERY_MS_DEFAULT)) {
        report.custodianEventsRecovered += await stage('custodian-poll', tenantId, () =>
          pollCustodian(ctx, tenantId),
        );
      }
      report.inbound += await stage('inbox', tenantId, () => processInbox(ctx, tenantId));
      report.resumed += await stage('resume', tenantId, () => resumeSigned(ctx, tenantId));
      report.dispatched += await stage('dispatch', tenantId, () => dispatchApproved(ctx, tenantId));
      report.watched += await stage('watch', tenantId, () => watchBroadcast(ctx, tenantId));
      report.replaced += await stage('replace', tenantId, () => replaceStuck(ctx, tenantId));
      report.reconciled += await stage('reconcile', tenantId, () => reconcileUnknown(ctx, tenantId));
      report.rechecked += await stage('reorg', tenantId, () => recheckConfirmed(ctx, tenantId));
      report.delivered += await stage('deliver', tenantId, () => deliverNotifications(ctx, tenantId));
      report.depositsObserved += await stage('deposits', tenantId, () => watchDeposits(ctx, tenantId));
    }
    // Periodic jobs run for EVERY tenant, idle or not: a quiet tenant's balances must still be
    // proven and its keys still expire (issue 13). Tenant ids only, from a SECURITY DEFINER function.
    Object.assign(pass, { stage: 'all-tenants', tenantId: '' });
    for (const tenantId of await allTenantIds(ctx.db)) {
      if (due('reconciliation', tenantId, options.reconcileEveryMs)) {
        report.breaksOpened += await stage(
          'reconciliation',
          tenantId,
          async () => (await reconcileTenant(ctx, tenantId)).breaksOpened,
        );
      }
      if (due('balance-reconciliation', tenantId, options.reconcileEveryMs)) balanceDue.push(tenantId);
      if (due('retention', tenantId, options.expireKeysEveryMs ?? KEY_RETENTION_RUN_EVERY_MS)) {
        report.keysExpired += await stage('retention', tenantId, () => expireSettledKeys(ctx, tenantId));
      }
    }
    if (balanceDue.length > 0) startBalanceReconciliation(balanceDue);
    return report;
  }

  let timer: NodeJS.Timeout | null = null;
  let watchdog: NodeJS.Timeout | null = null;
  let running: Promise<unknown> = Promise.resolve();
  let passing = false;
  let stopped = false;
  const stallAlertMs = options.stallAlertMs ?? 5 * 60_000;
  return {
    runOnce,
    start(intervalMs) {
      const tick = () => {
        if (stopped) return;
        passing = true;
        running = runOnce()
          .catch((error: unknown) =>
            ctx.log.error({ message: scrubbedError(error, 300) }, 'worker pass failed'),
          )
          .finally(() => {
            passing = false;
            if (!stopped) timer = setTimeout(tick, intervalMs);
          });
      };
      watchdog = setInterval(
        () => {
          const runningForMs = Date.now() - pass.startedAt;
          if (!passing || pass.alerted || runningForMs < stallAlertMs) return;
          pass.alerted = true;
          ctx.log.error(
            { alert: true, stage: pass.stage, tenantId: pass.tenantId || undefined, runningForMs },
            'ALERT worker pass stalled',
          );
        },
        Math.max(25, Math.min(stallAlertMs / 4, 10_000)),
      );
      watchdog.unref();
      tick();
    },
    async idle() {
      await balanceJob;
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (watchdog) clearInterval(watchdog);
      await running;
      await balanceJob;
    },
  };
}
