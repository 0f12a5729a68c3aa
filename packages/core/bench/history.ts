import { sql } from 'drizzle-orm';
import { listAccountWithdrawals } from '../src/customer/account.ts';
import {
  type Database,
  listOperations,
  openDatabase,
  operationStats,
  rowsOf,
  submitWithdrawal,
  withTenant,
} from '../src/index.ts';
import { encodeCursor } from '../src/queries/page-cursor.ts';
import { LatencyRecorder, type LatencySummary } from './latency.ts';
import { fundedTenant } from './workload.ts';

const ACCOUNTS = 10_000;
const LOAD_CONCURRENCY = 16;
const SAMPLES = 300;
/** The bar (issue 14): every list a screen or integrator reads stays under this p99 at 1M rows. */
export const HISTORY_P99_TARGET_MS = 20;

export interface HistoryOutcome {
  operations: number;
  loadSeconds: number;
  loadPerSec: number;
  reads: { name: string; latency: LatencySummary; met: boolean }[];
  violations: string[];
}

/**
 * A tenant with a long history: `total` withdrawals created through the creation function (the
 * path the API takes), then the reads a busy console and an integrator make, each called
 * sequentially `SAMPLES` times: the first page, a page deep in the history by cursor, a page
 * filtered by state, one account's history, and the metrics aggregate (uncached, the read a
 * scrape makes at most once per interval).
 */
export async function historyPhase(url: string, total: number): Promise<HistoryOutcome> {
  const handle = await openDatabase({ url, maxConnections: LOAD_CONCURRENCY });
  try {
    const { tenantId, accountIds } = await fundedTenant(handle.db, 'bench history', ACCOUNTS, 16);
    const started = performance.now();
    let next = 0;
    let lastReport = started;
    await Promise.all(
      Array.from({ length: LOAD_CONCURRENCY }, async () => {
        for (let n = next++; n < total; n = next++) {
          const withdrawalId = `hist-${n}`;
          const claim = await submitWithdrawal(handle.db, {
            tenantId,
            idempotencyKey: `withdrawal-${withdrawalId}`,
            request: {
              withdrawalId,
              accountId: accountIds[n % accountIds.length] ?? 'acct-0',
              asset: 'ETH',
              destination: '0x00000000000000000000000000000000000000aa',
              amountMinor: '1000',
            },
          });
          if (claim.outcome !== 'CREATED')
            throw new Error(`history load: ${withdrawalId} answered ${claim.outcome}`);
          if (performance.now() - lastReport > 30_000) {
            lastReport = performance.now();
            console.log(`  history: ${next} of ${total} created`);
          }
        }
      }),
    );
    const loadSeconds = (performance.now() - started) / 1000;
    await handle.db.execute(sql`analyze operations`);
    const reads = await measureReads(handle.db, tenantId, accountIds);
    const violations: string[] = [];
    const [count] = rowsOf<{ n: string }>(
      await withTenant(handle.db, tenantId, (tx) =>
        tx.execute(
          sql`select count(*)::text as n from operations where tenant_id = ${tenantId} and kind = 'withdrawal'`,
        ),
      ),
    );
    if (Number(count?.n) !== total)
      violations.push(`history holds ${count?.n} operations, ${total} acknowledged`);
    return { operations: total, loadSeconds, loadPerSec: total / loadSeconds, reads, violations };
  } finally {
    await handle.close();
  }
}

async function measureReads(db: Database, tenantId: string, accountIds: string[]) {
  // A position half-way through the history, as a client that paged that far holds it.
  const [middle] = rowsOf<{ at: string; id: string }>(
    await withTenant(db, tenantId, (tx) =>
      tx.execute(sql`select created_at::text as at, operation_id::text as id from operations
        where tenant_id = ${tenantId} order by created_at desc, operation_id desc
        offset (select count(*) / 2 from operations where tenant_id = ${tenantId}) limit 1`),
    ),
  );
  if (!middle) throw new Error('history: no middle row');
  const deepCursor = encodeCursor(middle.at, middle.id);
  const inTenant = <T>(work: Parameters<typeof withTenant<T>>[2]) => withTenant(db, tenantId, work);
  const cases: [string, (i: number) => Promise<unknown>][] = [
    ['first page', () => inTenant((tx) => listOperations(tx, tenantId, { kind: 'withdrawal', limit: 50 }))],
    [
      'deep cursor page',
      () =>
        inTenant((tx) => listOperations(tx, tenantId, { kind: 'withdrawal', limit: 50, cursor: deepCursor })),
    ],
    [
      'filtered by state',
      () =>
        inTenant((tx) =>
          listOperations(tx, tenantId, {
            kind: 'withdrawal',
            state: 'REQUESTED',
            limit: 50,
            cursor: deepCursor,
          }),
        ),
    ],
    [
      'one account history',
      (i) =>
        inTenant((tx) =>
          listAccountWithdrawals(tx, tenantId, accountIds[(i * 7919) % accountIds.length] ?? 'acct-0', {
            limit: 50,
          }),
        ),
    ],
    ['metrics aggregate (uncached)', () => operationStats(db)],
  ];
  const results: HistoryOutcome['reads'] = [];
  for (const [name, read] of cases) {
    const recorder = new LatencyRecorder();
    for (let i = 0; i < 10; i += 1) await read(i); // warm the connection and the plan
    for (let i = 0; i < SAMPLES; i += 1) await recorder.time(() => read(i));
    const latency = recorder.summary();
    results.push({ name, latency, met: latency.p99Ms < HISTORY_P99_TARGET_MS });
  }
  return results;
}
