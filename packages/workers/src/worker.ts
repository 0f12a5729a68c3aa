import { isIdemError, scrubbedError } from '@idem/contracts';
import { allTenantIds, type Database, type EgressPolicy, STRICT_EGRESS } from '@idem/core';
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
import { checkTrips, FREEZE_TRIPS_RUN_EVERY_MS } from './steps/freeze-trips.ts';
import { applyGovernance, GOVERNANCE_RUN_EVERY_MS } from './steps/governance.ts';
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
  /** Apply due control changes and expire proposals per tenant at most this often (default 1 minute). */
  governanceEveryMs?: number;
  /** Measure every tenant's automatic freeze trips at most this often, work or not (default 1 minute). */
  freezeTripsEveryMs?: number;
  /** Automatic fee bumps of stuck withdrawals, per network (defaults: DEFAULT_REPLACE_POLICIES). */
  replacePolicies?: Record<string, ReplacePolicy>;
  /**
   * A pass still running after this long is reported once as an ALERT naming its stage and tenant
   * (default 5 minutes): a worker whose pass never ends moves nothing, and says nothing otherwise.
   */
  stallAlertMs?: number;
  /**
   * Where outbound webhooks may connect: the deployment's policy (https, public addresses, its
   * allowlist). Default: the strictest (https to public addresses only); the server and `idem
   * worker` always state the deployment's (server/src/env.ts).
   */
  egress?: EgressPolicy;
  /** The clock ages are measured against (default Date.now): see WorkerContext.now. */
  now?: () => number;
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
  /** Approved control changes whose delay had passed, applied. */
  controlChangesApplied: number;
  /** Freezes the automatic trips made (docs/GOVERNANCE.md "Automatic trips"). */
  tripsFired: number;
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
  const loop = new WorkerLoop(options, contextOf(options));
  return {
    runOnce: () => loop.runOnce(),
    start: (intervalMs) => loop.start(intervalMs),
    idle: () => loop.idle(),
    stop: () => loop.stop(),
  };
}

function contextOf(options: WorkerOptions): WorkerContext {
  return {
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
    egress: options.egress ?? STRICT_EGRESS,
    now: options.now ?? Date.now,
  };
}

function emptyReport(): TickReport {
  return {
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
    controlChangesApplied: 0,
    tripsFired: 0,
  };
}

/** The worker's passes: the stages per tenant with work, the periodic jobs, and the stall watchdog. */
class WorkerLoop {
  /** When each periodic job last ran, per tenant. */
  private readonly lastRun = new Map<string, number>();
  /** Where the running pass is, for the stall alert (one pass at a time runs under start()). */
  private readonly pass = { startedAt: 0, stage: 'tenants', tenantId: '', alerted: false };
  private balanceJob: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private watchdog: NodeJS.Timeout | null = null;
  private running: Promise<unknown> = Promise.resolve();
  private passing = false;
  private stopped = false;

  constructor(
    private readonly options: WorkerOptions,
    private readonly ctx: WorkerContext,
  ) {}

  async runOnce(): Promise<TickReport> {
    Object.assign(this.pass, { startedAt: this.ctx.now(), stage: 'tenants', tenantId: '', alerted: false });
    const report = emptyReport();
    await this.verifyNodeChain();
    const tenants = visitOrder(await tenantsWithWork(this.ctx.db, this.ctx.reorgWindowSeconds));
    report.tenants = tenants.length;
    for (const tenantId of tenants) await this.moveTenant(tenantId, report);
    await this.periodicJobs(report);
    return report;
  }

  start(intervalMs: number): void {
    const tick = () => {
      if (this.stopped) return;
      this.passing = true;
      this.running = this.runOnce()
        .catch((error: unknown) =>
          this.ctx.log.error({ message: scrubbedError(error, 300) }, 'worker pass failed'),
        )
        .finally(() => {
          this.passing = false;
          if (!this.stopped) this.timer = setTimeout(tick, intervalMs);
        });
    };
    this.watchStalls();
    tick();
  }

  async idle(): Promise<void> {
    await this.balanceJob;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.watchdog) clearInterval(this.watchdog);
    await this.running;
    await this.balanceJob;
  }

  /**
   * Before anything is signed, the node must report the configured chain. A node that cannot be
   * asked is retried next pass (the custodian and the ledger's work go on meanwhile); a node of
   * another chain is an alert every pass, and every hot wallet stays unsigned (RailRegistry.evmFor).
   */
  private async verifyNodeChain(): Promise<void> {
    if (!this.ctx.rails.config.evm) return;
    try {
      await this.ctx.rails.verifyNodeChain();
    } catch (error) {
      const mismatch = isIdemError(error);
      this.ctx.log[mismatch ? 'error' : 'warn'](
        { alert: mismatch, message: scrubbedError(error, 300) },
        mismatch
          ? 'ALERT the EVM node serves another chain: nothing is signed'
          : 'EVM node chain id unverified',
      );
    }
  }

  /** Every stage, in order, for one tenant with work. */
  private async moveTenant(tenantId: string, report: TickReport): Promise<void> {
    const { ctx, options } = this;
    report.reviewed += await this.stage('review', tenantId, () => reviewPending(ctx, tenantId));
    // Before the inbox, so what the poll finds is applied in the same pass.
    if (
      this.due('custodian-poll', tenantId, options.custodianPollEveryMs ?? CUSTODIAN_POLL_EVERY_MS_DEFAULT)
    ) {
      report.custodianEventsRecovered += await this.stage('custodian-poll', tenantId, () =>
        pollCustodian(ctx, tenantId),
      );
    }
    report.inbound += await this.stage('inbox', tenantId, () => processInbox(ctx, tenantId));
    // Before anything is sent: a threshold crossed since the last pass freezes first.
    report.tripsFired += await this.stage('trips', tenantId, () => checkTrips(ctx, tenantId));
    report.resumed += await this.stage('resume', tenantId, () => resumeSigned(ctx, tenantId));
    report.dispatched += await this.stage('dispatch', tenantId, () => dispatchApproved(ctx, tenantId));
    report.watched += await this.stage('watch', tenantId, () => watchBroadcast(ctx, tenantId));
    report.replaced += await this.stage('replace', tenantId, () => replaceStuck(ctx, tenantId));
    report.reconciled += await this.stage('reconcile', tenantId, () => reconcileUnknown(ctx, tenantId));
    // Right after the stages that move withdrawals to UNKNOWN or FAILED_TERMINAL.
    report.tripsFired += await this.stage('trips', tenantId, () => checkTrips(ctx, tenantId));
    report.rechecked += await this.stage('reorg', tenantId, () => recheckConfirmed(ctx, tenantId));
    report.delivered += await this.stage('deliver', tenantId, () => deliverNotifications(ctx, tenantId));
    report.depositsObserved += await this.stage('deposits', tenantId, () => watchDeposits(ctx, tenantId));
  }

  /**
   * Periodic jobs run for EVERY tenant, idle or not: a quiet tenant's balances must still be
   * proven and its keys still expire. Tenant ids only, from a SECURITY DEFINER function.
   */
  private async periodicJobs(report: TickReport): Promise<void> {
    const { ctx, options } = this;
    const balanceDue: string[] = [];
    Object.assign(this.pass, { stage: 'all-tenants', tenantId: '' });
    for (const tenantId of await allTenantIds(ctx.db)) {
      if (this.due('reconciliation', tenantId, options.reconcileEveryMs)) {
        report.breaksOpened += await this.stage(
          'reconciliation',
          tenantId,
          async () => (await reconcileTenant(ctx, tenantId)).breaksOpened,
        );
      }
      if (this.due('balance-reconciliation', tenantId, options.reconcileEveryMs)) balanceDue.push(tenantId);
      if (this.due('retention', tenantId, options.expireKeysEveryMs ?? KEY_RETENTION_RUN_EVERY_MS)) {
        report.keysExpired += await this.stage('retention', tenantId, () => expireSettledKeys(ctx, tenantId));
      }
      if (this.due('freeze-trips', tenantId, options.freezeTripsEveryMs ?? FREEZE_TRIPS_RUN_EVERY_MS)) {
        report.tripsFired += await this.stage('trips', tenantId, () => checkTrips(ctx, tenantId));
      }
      if (this.due('governance', tenantId, options.governanceEveryMs ?? GOVERNANCE_RUN_EVERY_MS)) {
        report.controlChangesApplied += await this.stage('governance', tenantId, () =>
          applyGovernance(ctx, tenantId),
        );
      }
    }
    if (balanceDue.length > 0) this.startBalanceReconciliation(balanceDue);
  }

  private due(job: string, tenantId: string, everyMs: number | undefined): boolean {
    if (everyMs === undefined) return false;
    const key = `${job}:${tenantId}`;
    if (Date.now() - (this.lastRun.get(key) ?? 0) < everyMs) return false;
    this.lastRun.set(key, Date.now());
    return true;
  }

  /**
   * One stage for one tenant. A stage that fails (a node or custodian that cannot be asked, a
   * database hiccup) is logged and skipped for this pass: it is no evidence of anything, and the
   * other stages and tenants go on. Every stage is safe to repeat on the next pass.
   */
  private async stage(name: string, tenantId: string, work: () => Promise<number>): Promise<number> {
    this.pass.stage = name;
    this.pass.tenantId = tenantId;
    try {
      return await work();
    } catch (error) {
      this.ctx.log.warn({ tenantId, stage: name, message: scrubbedError(error, 200) }, 'stage skipped');
      return 0;
    }
  }

  /**
   * Balance-level reconciliation reads many balances and receipts from the node and the custodian;
   * a slow or hanging node must not hold up the stages that move money. So it runs beside the
   * passes, one job at a time: tenants that come due while a job runs wait for the next pass.
   */
  private startBalanceReconciliation(tenantIds: string[]): void {
    if (this.balanceJob) {
      for (const tenantId of tenantIds) this.lastRun.delete(`balance-reconciliation:${tenantId}`);
      return;
    }
    const { ctx } = this;
    // A shared custodian account is observed once per job for all of its tenants.
    const accountPasses = new Map<string, Promise<CustodianAccountPass>>();
    this.balanceJob = (async () => {
      for (const tenantId of tenantIds) {
        await this.stage(
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
      this.balanceJob = null;
    });
  }

  /** A pass still running after stallAlertMs is reported once, naming its stage and tenant. */
  private watchStalls(): void {
    const stallAlertMs = this.options.stallAlertMs ?? 5 * 60_000;
    this.watchdog = setInterval(
      () => {
        const runningForMs = this.ctx.now() - this.pass.startedAt;
        if (!this.passing || this.pass.alerted || runningForMs < stallAlertMs) return;
        this.pass.alerted = true;
        this.ctx.log.error(
          { alert: true, stage: this.pass.stage, tenantId: this.pass.tenantId || undefined, runningForMs },
          'ALERT worker pass stalled',
        );
      },
      // At least once a second: a comparison, cheap, and an alert never waits long past its age.
      Math.max(25, Math.min(stallAlertMs / 4, 1_000)),
    );
    this.watchdog.unref();
  }
}
