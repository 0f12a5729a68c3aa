import { randomUUID } from 'node:crypto';
import type { Network } from '@idem/contracts';
import { payloadHash } from '@idem/contracts/payload';
import { LatencyRecorder, type LatencySummary } from '@idem/testing/bench';
import { sql } from 'drizzle-orm';
import { listAccountWithdrawals } from '../src/customer/account.ts';
import {
  type Database,
  listOperations,
  openDatabase,
  operationListConditions,
  operationPageQuery,
  operationStats,
  rowsOf,
  withTenant,
} from '../src/index.ts';
import { withdrawalPayload } from '../src/operations/prepare-withdrawal.ts';
import { encodeCursor } from '../src/queries/page-cursor.ts';
import { fundedTenant } from './workload.ts';

const ACCOUNTS = 10_000;
/**
 * The load runs the creation function many times per statement (one chunk of rows), in a few
 * parallel connections. Each connection owns the accounts whose index is its number modulo the
 * connection count, so no two statements wait on (or deadlock over) one balance row.
 */
const LOAD_CONNECTIONS = 4;
const LOAD_CHUNK = 10_000;
const SAMPLES = 300;
/** Withdrawals left in flight (REQUESTED) after the history is aged: the metrics aggregate reads these. */
const IN_FLIGHT_KEPT = 10_000;
/** The bar: every list a screen or integrator reads stays under this p99 at 1M rows. */
export const HISTORY_P99_TARGET_MS = 20;

export interface HistoryOutcome {
  operations: number;
  loadSeconds: number;
  loadPerSec: number;
  reads: { name: string; latency: LatencySummary; met: boolean; plan: string }[];
  violations: string[];
}

/**
 * A tenant with a long history: `total` withdrawals created through the creation function (the
 * path the API takes), then the reads a busy console and an integrator make, each called
 * sequentially `SAMPLES` times: the first page, a page deep in the history by cursor, a page
 * filtered by state, one account's history, and the metrics aggregate (uncached, the read a
 * scrape makes at most once per interval).
 */
/**
 * `total` withdrawals of 1000 wei each in one tenant, through `idem_create_withdrawal` (the SQL
 * function the server calls: identity claim, history row, work items, journal entry and hold), but
 * `LOAD_CHUNK` calls per statement: the payloads are hashed here exactly as `submitWithdrawal`
 * hashes them and passed as arrays. Every row must come back as the new REQUESTED operation.
 * All rows of one statement share its transaction's `created_at`; pages order by
 * (created_at, operation_id), so that only makes ties the cursor must already handle.
 */
export async function loadHistory(
  db: Database,
  tenantId: string,
  accountIds: string[],
  total: number,
  keepInFlight = total,
) {
  const [context] = rowsOf<{ network: string; policy_version: number }>(
    await db.execute(sql`select a.network, t.policy_version from assets a join tenants t using (tenant_id)
      where a.tenant_id = ${tenantId} and a.code = 'ETH'`),
  );
  if (!context) throw new Error('history load: the tenant has no ETH asset');
  const network = context.network as Network;
  const destination = '0x00000000000000000000000000000000000000aa';
  if (accountIds.length % LOAD_CONNECTIONS !== 0)
    throw new Error(
      `history load: ${accountIds.length} accounts do not split over ${LOAD_CONNECTIONS} connections`,
    );
  let lastReport = performance.now();
  let created = 0;
  await Promise.all(
    Array.from({ length: LOAD_CONNECTIONS }, async (_, lane) => {
      // This lane's rows: n ≡ lane (mod connections), so its accounts are n mod accounts ≡ lane too.
      for (let from = lane; from < total; from += LOAD_CHUNK * LOAD_CONNECTIONS) {
        const ids: string[] = [];
        const keys: string[] = [];
        const refs: string[] = [];
        const accounts: string[] = [];
        const hashes: string[] = [];
        const aged: string[] = [];
        for (let n = from; n < total && ids.length < LOAD_CHUNK; n += LOAD_CONNECTIONS) {
          const withdrawalId = `hist-${n}`;
          const accountId = accountIds[n % accountIds.length] ?? 'acct-0';
          const payload = withdrawalPayload(
            tenantId,
            { withdrawalId, accountId, asset: 'ETH', destination, amountMinor: '1000' },
            network,
            context.policy_version,
          );
          ids.push(randomUUID());
          keys.push(`withdrawal-${withdrawalId}`);
          refs.push(withdrawalId);
          accounts.push(accountId);
          hashes.push(payloadHash(payload));
          if (n < total - keepInFlight) aged.push(ids.at(-1) ?? '');
        }
        const [row] = rowsOf<{ created: string; calls: string }>(
          await db.execute(sql`select count(*)::text as calls,
              count(*) filter (where op.operation_id = r.id and op.state = 'REQUESTED')::text as created
            from unnest(${pgArray(ids)}::uuid[], ${pgArray(keys)}::text[], ${pgArray(refs)}::text[],
                        ${pgArray(accounts)}::text[], ${pgArray(hashes)}::text[]) as r(id, key, ref, account, hash),
            lateral idem_create_withdrawal(${tenantId}::uuid, r.id, r.key, r.ref, r.account, 'ETH', ${network},
              ${destination}, null, 1000::numeric, null, ${context.policy_version}::integer, r.hash, 'bench') as op`),
        );
        if (Number(row?.created) !== ids.length)
          throw new Error(
            `history load: ${row?.created} of ${ids.length} calls created a REQUESTED withdrawal`,
          );
        // Aged while the chunk's index pages are still in memory: one UPDATE of a million rows
        // after the load measured about 5,000 rows a minute here (random index pages from disk).
        if (aged.length > 0) await ageWithdrawals(db, tenantId, aged);
        created += ids.length;
        if (performance.now() - lastReport > 30_000) {
          lastReport = performance.now();
          console.log(`  history: ${created} of ${total} created`);
        }
      }
    }),
  );
}

/**
 * A history as a running exchange has it: all but the newest withdrawals are settled (CONFIRMED,
 * last changed when created). The state machine would take each through approval, signing and
 * confirmation; this bench measures reads, so the rows are moved by one UPDATE per chunk with
 * triggers off (the scratch database's holds are left as they were and are not read).
 */
async function ageWithdrawals(db: Database, tenantId: string, operationIds: string[]) {
  await db.transaction(async (tx) => {
    await tx.execute(sql`set local session_replication_role = replica`);
    await tx.execute(sql`update operations
        set state = 'CONFIRMED', version = version + 1, updated_at = created_at, settled_at = created_at
      where tenant_id = ${tenantId} and operation_id = any(${pgArray(operationIds)}::uuid[]) and state = 'REQUESTED'`);
  });
}

/** A PostgreSQL array literal of plain tokens (ids, keys and hashes here: no quotes or commas). */
function pgArray(values: string[]): string {
  return `{${values.join(',')}}`;
}

export async function historyPhase(url: string, total: number): Promise<HistoryOutcome> {
  const handle = await openDatabase({ url, maxConnections: LOAD_CONNECTIONS });
  try {
    const { tenantId, accountIds } = await fundedTenant(handle.db, 'bench history', ACCOUNTS, 16);
    const started = performance.now();
    await loadHistory(handle.db, tenantId, accountIds, total, IN_FLIGHT_KEPT);
    const loadSeconds = (performance.now() - started) / 1000;
    await handle.db.execute(sql`vacuum analyze operations`);
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
  const cases: [string, (i: number) => Promise<unknown>, () => Promise<string>][] = [
    [
      'first page',
      () => inTenant((tx) => listOperations(tx, tenantId, { kind: 'withdrawal', limit: 50 })),
      () => explainPage(db, tenantId, { kind: 'withdrawal' }, { limit: 50 }),
    ],
    [
      'deep cursor page',
      () =>
        inTenant((tx) => listOperations(tx, tenantId, { kind: 'withdrawal', limit: 50, cursor: deepCursor })),
      () => explainPage(db, tenantId, { kind: 'withdrawal' }, { limit: 50, cursor: deepCursor }),
    ],
    [
      'filtered by state',
      () =>
        inTenant((tx) =>
          listOperations(tx, tenantId, {
            kind: 'withdrawal',
            state: 'CONFIRMED',
            limit: 50,
            cursor: deepCursor,
          }),
        ),
      () =>
        explainPage(
          db,
          tenantId,
          { kind: 'withdrawal', state: 'CONFIRMED' },
          { limit: 50, cursor: deepCursor },
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
      () =>
        explainPage(
          db,
          tenantId,
          { kind: 'withdrawal', accountRef: accountIds[7919] ?? 'acct-0' },
          { limit: 50 },
        ),
    ],
    // The read a scrape makes (at most once per IDEM_METRICS_CACHE_MS): the in-flight states only.
    ['metrics aggregate (uncached)', () => operationStats(db), () => explainMetrics(db)],
  ];
  const results: HistoryOutcome['reads'] = [];
  for (const [name, read, explain] of cases) {
    const recorder = new LatencyRecorder();
    for (let i = 0; i < 10; i += 1) await read(i); // warm the connection and the plan
    for (let i = 0; i < SAMPLES; i += 1) await recorder.time(() => read(i));
    const latency = recorder.summary();
    results.push({ name, latency, met: latency.p99Ms < HISTORY_P99_TARGET_MS, plan: await explain() });
  }
  return results;
}

/**
 * EXPLAIN (ANALYZE, BUFFERS) of a read, summed up on one line (its scan and sort nodes, buffers and
 * PostgreSQL's own execution time), as the evidence beside a latency that the machine's load moves.
 */
function summarise(rows: Record<string, unknown>[]): string {
  const lines = rows.map((row) => String(Object.values(row)[0]).trim());
  const nodes = lines.filter((line) => /Scan|Sort|Aggregate/.test(line) && !line.startsWith('Sort Key'));
  const buffers = lines.find((line) => line.startsWith('Buffers:'));
  const execution = lines.find((line) => line.startsWith('Execution Time'));
  return [
    ...nodes.map((line) => line.replace(/^->\s*/, '').replace(/\s*\(actual.*$/, '')),
    buffers,
    execution,
  ]
    .filter(Boolean)
    .join('; ');
}

function explainPage(
  db: Database,
  tenantId: string,
  filter: Parameters<typeof operationListConditions>[1],
  options: { limit: number; cursor?: string },
): Promise<string> {
  return withTenant(db, tenantId, async (tx) =>
    summarise(
      rowsOf(
        await tx.execute(
          sql`explain (analyze, buffers) ${operationPageQuery(tx, operationListConditions(tenantId, filter), options).getSQL()}`,
        ),
      ),
    ),
  );
}

/** The aggregate function's own query, as the role it runs as. */
function explainMetrics(db: Database): Promise<string> {
  return db.transaction(async (tx) => {
    const [fn] = rowsOf<{ body: string }>(
      await tx.execute(sql`select prosrc as body from pg_proc where proname = 'idem_operation_stats'`),
    );
    await tx.execute(sql`set local role idem_metrics`);
    return summarise(rowsOf(await tx.execute(sql.raw(`explain (analyze, buffers) ${fn?.body ?? ''}`))));
  });
}
