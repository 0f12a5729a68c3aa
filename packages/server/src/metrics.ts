import { inboxOutcomes, operationStates } from '@idem/contracts';
import { type Database, observeBatches, operationStats, settledOperationStats } from '@idem/core';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * States whose oldest age is a go/no-go signal: an owner must resolve them (C13, C15), or, for
 * BROADCAST, a transaction not mined for long is stuck (a fee too low, dropped).
 */
const WATCHED_STATES = ['UNKNOWN', 'FAILED_TERMINAL', 'BROADCAST'] as const;

/**
 * One registry per server. Operation gauges are read from the database, through aggregate-only
 * functions, so they are right across processes and restarts. The in-flight states are read from
 * their partial index (cost: the work in progress) and reused for `cacheMs`: however many scrapes
 * arrive, at most one read per interval (I11-F9). A failed read is not reused, so recovery shows
 * on the next scrape. The settled states' totals grow with the history, so they are read at most
 * once per `settledCacheMs`, in the background once a first value exists (I14-LIST): a scrape
 * never waits on a read of the whole history except the server's first.
 */
export function createMetrics(db: Database, options: { cacheMs: number; settledCacheMs?: number }) {
  const settledCacheMs = options.settledCacheMs ?? 300_000;
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  const requestDuration = new Histogram({
    name: 'idem_http_request_duration_seconds',
    help: 'HTTP request latency by route and status',
    labelNames: ['route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const webhookDeliveries = new Counter({
    name: 'idem_webhook_deliveries_total',
    help: 'Inbound webhook deliveries by outcome class (C18-C20)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  for (const outcome of inboxOutcomes) webhookDeliveries.inc({ outcome }, 0);
  // The gathering of withdrawal submissions: what IDEM_BATCH_* comes to under the
  // real load, items per statement and each statement's time.
  const batchItems = new Histogram({
    name: 'idem_withdrawal_batch_items',
    help: 'Withdrawal submissions gathered into one statement (1: sent alone; the bulk API is not counted)',
    buckets: [1, 2, 3, 4, 8, 16, 32, 64, 128, 256],
    registers: [registry],
  });
  const batchSeconds = new Histogram({
    name: 'idem_withdrawal_batch_seconds',
    help: 'From a gathered batch being sent to its answer (after COMMIT), waiting for a connection included',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  observeBatches(db, (items, seconds) => {
    batchItems.observe(items);
    batchSeconds.observe(seconds);
  });

  // prom-client collects every metric of a scrape at once, so the three gauges below, and
  // concurrent scrapes, share one read: whichever collects first starts it, the others await the
  // same promise, and until `cacheMs` after it started its answer is served as is.
  let lastStats: Awaited<ReturnType<typeof operationStats>> | null = null;
  let statsError = false;
  let readStartedAt = Number.NEGATIVE_INFINITY;
  let reading: Promise<void> | null = null;
  let settled: Awaited<ReturnType<typeof settledOperationStats>> | null = null;
  let settledStartedAt = Number.NEGATIVE_INFINITY;
  let settledReading: Promise<void> | null = null;
  const refreshSettled = () => {
    if (!settledReading && Date.now() - settledStartedAt >= settledCacheMs) {
      const startedAt = Date.now();
      settledReading = settledOperationStats(db)
        .then(
          (rows) => {
            settled = rows;
            settledStartedAt = startedAt;
          },
          () => {
            // Kept: the last totals stay served; the next scrape tries again.
          },
        )
        .finally(() => {
          settledReading = null;
        });
    }
    // Only the first read is waited for; later ones refresh behind the scrapes.
    return settled === null && settledReading ? settledReading : Promise.resolve();
  };
  const refresh = () => Promise.all([refreshInFlight(), refreshSettled()]);
  const refreshInFlight = () => {
    if (reading) return reading;
    if (lastStats && !statsError && Date.now() - readStartedAt < options.cacheMs) return Promise.resolve();
    const startedAt = Date.now();
    reading = operationStats(db)
      .then(
        (stats) => {
          lastStats = stats;
          statsError = false;
          readStartedAt = startedAt;
        },
        () => {
          statsError = true;
        },
      )
      .finally(() => {
        reading = null;
      });
    return reading;
  };

  new Gauge({
    name: 'idem_operations',
    help: 'Operations by state, all tenants',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      await refresh();
      for (const state of operationStates) {
        const count =
          lastStats?.find((s) => s.state === state)?.operations ??
          settled?.find((s) => s.state === state)?.operations ??
          0;
        this.set({ state }, count);
      }
    },
  });
  new Gauge({
    name: 'idem_operation_oldest_age_seconds',
    help: 'Age of the oldest operation in a state that needs an owner, or BROADCAST not yet confirmed (0 when there is none)',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      await refresh();
      for (const state of WATCHED_STATES) {
        this.set({ state }, lastStats?.find((s) => s.state === state)?.oldestSeconds ?? 0);
      }
    },
  });
  new Gauge({
    name: 'idem_metrics_database_errors',
    help: '1 when the last scrape could not read operation counts from the database',
    registers: [registry],
    async collect() {
      await refresh();
      this.set(statsError || settled === null ? 1 : 0);
    },
  });

  return { registry, requestDuration, webhookDeliveries };
}
