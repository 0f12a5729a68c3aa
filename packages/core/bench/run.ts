import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { createScratchDatabase, runPgbench } from '@idem/testing/bench';
import { openDatabase } from '../src/index.ts';
import { type BatchSizeFigure, batchSizePhase } from './batch-sizes.ts';
import { HISTORY_P99_TARGET_MS, type HistoryOutcome, historyPhase } from './history.ts';
import { printTable, publish, type Row, round } from './report.ts';
import { creationPhase, fundedTenant, stormPhase } from './workload.ts';

/**
 * `pnpm bench` (core): withdrawal creation on PostgreSQL, measured against pgbench's TPC-B-like
 * script on the same server in the same run. Exits non-zero if any phase leaves the database
 * inconsistent with what the callers were told; a missed throughput target is reported, not fatal.
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const WARMUP_MS = Math.min(2_000, SECONDS * 200);
const ACCOUNTS = 1_000;
const STORM_CALLERS = 100;
const STORM_POOL = 20;
const STORM_ROUNDS = 10;
const TARGETS = { many8: 0.7, hot8: 0.3 } as const;
/** Withdrawals in the long-history tenant (the long-history target: 1,000,000); 0 skips the phase. */
const HISTORY_OPERATIONS = Number(process.env.BENCH_HISTORY_OPERATIONS ?? 1_000_000);
/**
 * Which phases run: `BENCH_PHASES=creation,history` by default. `creation` is pgbench and the
 * creation and storm phases (their figures are ratios to pgbench's); `history` the long history.
 * A run of some phases only publishes to its own file, so it never overwrites a full run's.
 */
const ALL_PHASES = ['creation', 'history'] as const;
const PHASES = new Set((process.env.BENCH_PHASES ?? ALL_PHASES.join(',')).split(',').map((p) => p.trim()));
const RESULTS_FILE = fileURLToPath(
  new URL(
    ALL_PHASES.every((phase) => PHASES.has(phase))
      ? '../../../bench-results/core.json'
      : `../../../bench-results/core.${[...PHASES].sort().join('-')}.json`,
    import.meta.url,
  ),
);

type Pgbench = Awaited<ReturnType<typeof runPgbench>>;
type Storm = Awaited<ReturnType<typeof stormPhase>>;

/** What the phases measured; each figure is absent when its phase did not run. */
interface Results {
  loadBefore: number;
  pgbench: Pgbench | undefined;
  rows: Row[];
  storm: Storm | undefined;
  batchSizes: BatchSizeFigure[] | undefined;
  history: HistoryOutcome | undefined;
  violations: string[];
}

async function main() {
  if (!Number.isFinite(SECONDS) || SECONDS <= 0) throw new Error('BENCH_SECONDS must be a positive number');
  const unknown = [...PHASES].filter((phase) => !(ALL_PHASES as readonly string[]).includes(phase));
  if (unknown.length > 0)
    throw new Error(`BENCH_PHASES: unknown ${unknown.join(', ')} (known: ${ALL_PHASES.join(', ')})`);
  console.log(
    `idem core bench: ${SECONDS}s per phase, ${cpus().length} CPUs shared by Node, PostgreSQL and pgbench`,
  );

  // Other processes on the machine move every figure; the load averages say how much to trust a run.
  const loadBefore = loadavg()[0] ?? 0;
  let pgbench: Pgbench | undefined;
  if (PHASES.has('creation')) {
    console.log('pgbench TPC-B-like, scale 10, -c 8 -j 2 ...');
    pgbench = await runPgbench(SECONDS);
    console.log(`pgbench: ${pgbench.tps.toFixed(0)} tps`);
  }

  const scratch = await createScratchDatabase('idem_bench');
  const results: Results = {
    loadBefore,
    pgbench,
    rows: [],
    storm: undefined,
    batchSizes: undefined,
    history: undefined,
    violations: [],
  };
  try {
    const setup = await openDatabase({ url: scratch.url, maxConnections: 8 });
    await setup.migrate();
    if (!pgbench) await setup.close();
    else await creationPhases(scratch.url, setup, pgbench, results);
    if (PHASES.has('history') && HISTORY_OPERATIONS > 0) {
      console.log(`long history: ${HISTORY_OPERATIONS} withdrawals in one tenant, then its reads ...`);
      results.history = await historyPhase(scratch.url, HISTORY_OPERATIONS);
      results.violations.push(...results.history.violations.map((v) => `history: ${v}`));
    }
  } finally {
    await scratch.drop();
  }
  printResults(results);
  await publishResults(results);
  if (results.violations.length > 0) process.exitCode = 1;
}

/**
 * The creation phases against pgbench's rate: each tenant funded first (on `setup`, which this
 * closes), then every creation phase on its own pool, the same-key storm, and the batch sizes.
 */
async function creationPhases(
  url: string,
  setup: Awaited<ReturnType<typeof openDatabase>>,
  pgbench: Pgbench,
  results: Results,
): Promise<void> {
  const { rows, violations } = results;
  const many8 = await fundedTenant(setup.db, 'bench many 8', ACCOUNTS, 8);
  const many16 = await fundedTenant(setup.db, 'bench many 16', ACCOUNTS, 8);
  const manyTx = await fundedTenant(setup.db, 'bench many in tx', ACCOUNTS, 8);
  const hot = await fundedTenant(setup.db, 'bench hot', 1, 1);
  const manyAlone = await fundedTenant(setup.db, 'bench many alone', ACCOUNTS, 8);
  const hotAlone = await fundedTenant(setup.db, 'bench hot alone', 1, 1);
  const stormTenant = await fundedTenant(setup.db, 'bench storm', 1, 1);
  await setup.close();
  const phases: CreationPhase[] = [
    {
      name: 'create, many accounts',
      tenant: many8,
      connections: 8,
      target: TARGETS.many8,
      label: 'm8',
      mode: 'statement',
    },
    {
      name: 'create, many accounts',
      tenant: many16,
      connections: 16,
      target: null,
      label: 'm16',
      mode: 'statement',
    },
    {
      name: 'create, one hot account',
      tenant: hot,
      connections: 8,
      target: TARGETS.hot8,
      label: 'h8',
      mode: 'statement',
    },
    // The same calls each written alone (no batching), for comparison.
    {
      name: 'create, many accounts, each alone',
      tenant: manyAlone,
      connections: 8,
      target: null,
      label: 'a8',
      mode: 'statement',
      batching: false,
    },
    {
      name: 'create, one hot account, each alone',
      tenant: hotAlone,
      connections: 8,
      target: null,
      label: 'ha8',
      mode: 'statement',
      batching: false,
    },
    // The same creation inside a caller's transaction (createWithdrawal), for comparison.
    {
      name: 'create in caller tx',
      tenant: manyTx,
      connections: 8,
      target: null,
      label: 't8',
      mode: 'transaction',
    },
  ];
  for (const phase of phases) rows.push(await creationRow(url, phase, pgbench, violations));

  console.log(
    `same-key storm: ${STORM_CALLERS} callers on a pool of ${STORM_POOL}, ${STORM_ROUNDS} rounds ...`,
  );
  const handle = await openDatabase({ url, maxConnections: STORM_POOL });
  let storm: Storm;
  try {
    storm = await stormPhase(handle.db, {
      tenantId: stormTenant.tenantId,
      accountId: stormTenant.accountIds[0] ?? 'acct-0',
      callers: STORM_CALLERS,
      rounds: STORM_ROUNDS,
    });
  } finally {
    await handle.close();
  }
  results.storm = storm;
  violations.push(...storm.violations.map((v) => `storm: ${v}`));

  console.log('batch sizes: one connection, sequential, backend CPU per item ...');
  results.batchSizes = await batchSizePhase(url);
  rows.push({
    name: `same-key storm x${STORM_CALLERS}`,
    connections: STORM_POOL,
    ops: storm.calls,
    opsPerSec: storm.opsPerSec,
    p50Ms: storm.latency.p50Ms,
    p99Ms: storm.latency.p99Ms,
    ratio: storm.opsPerSec / pgbench.tps,
    target: null,
    correct: storm.violations.length === 0,
  });
}

interface CreationPhase {
  name: string;
  tenant: Awaited<ReturnType<typeof fundedTenant>>;
  connections: number;
  target: number | null;
  label: string;
  mode: 'statement' | 'transaction';
  batching?: false;
}

/** One creation phase on its own pool, as a row of the table (its violations go to `violations`). */
async function creationRow(
  url: string,
  phase: CreationPhase,
  pgbench: Pgbench,
  violations: string[],
): Promise<Row> {
  console.log(`${phase.name}, ${phase.connections} connections ...`);
  const handle = await openDatabase({
    url,
    maxConnections: phase.connections,
    ...('batching' in phase ? { batching: phase.batching } : {}),
  });
  try {
    const outcome = await creationPhase(handle.db, {
      tenantId: phase.tenant.tenantId,
      accountIds: phase.tenant.accountIds,
      concurrency: phase.connections,
      warmupMs: WARMUP_MS,
      measureMs: SECONDS * 1000,
      label: phase.label,
      mode: phase.mode,
    });
    violations.push(...outcome.violations.map((v) => `${phase.name}/${phase.connections}: ${v}`));
    return {
      name: phase.name,
      connections: phase.connections,
      ops: outcome.measured,
      opsPerSec: outcome.opsPerSec,
      p50Ms: outcome.latency.p50Ms,
      p99Ms: outcome.latency.p99Ms,
      ratio: outcome.opsPerSec / pgbench.tps,
      target: phase.target,
      correct: outcome.violations.length === 0,
    };
  } finally {
    await handle.close();
  }
}

function printResults({ loadBefore, pgbench, rows, batchSizes, history, violations }: Results): void {
  console.log('');
  if (pgbench)
    printTable([
      {
        name: 'pgbench TPC-B-like',
        connections: 8,
        ops: pgbench.latency.count,
        opsPerSec: pgbench.tps,
        p50Ms: pgbench.latency.p50Ms,
        p99Ms: pgbench.latency.p99Ms,
        ratio: 1,
        target: null,
        correct: true,
      },
      ...rows,
    ]);
  if (batchSizes) {
    console.log('\none connection, sequential: items/s and PostgreSQL backend CPU per item by batch size');
    for (const figure of batchSizes) {
      console.log(
        `  ${String(figure.size).padStart(4)} per statement: ${String(figure.itemsPerSec).padStart(6)} items/s, ${figure.backendCpuMsPerItem ?? 'n/a'} ms CPU per item`,
      );
    }
  }
  if (history) {
    console.log(
      `\nlong history: ${history.operations} withdrawals loaded in ${history.loadSeconds.toFixed(0)} s (${history.loadPerSec.toFixed(0)}/s); sequential reads:`,
    );
    for (const read of history.reads) {
      console.log(
        `  ${read.name.padEnd(30)} p50 ${read.latency.p50Ms.toFixed(2)} ms  p99 ${read.latency.p99Ms.toFixed(2)} ms  (< ${HISTORY_P99_TARGET_MS} ms: ${read.met ? 'MET' : 'MISSED'})`,
      );
      console.log(`    plan: ${read.plan}`);
    }
  }
  for (const violation of violations) console.error(`VIOLATION ${violation}`);
  console.log(
    `1-minute load average: ${loadBefore.toFixed(2)} before, ${(loadavg()[0] ?? 0).toFixed(2)} after`,
  );
}

async function publishResults({
  loadBefore,
  pgbench,
  rows,
  storm,
  batchSizes,
  history,
  violations,
}: Results) {
  await publish(
    {
      seconds: SECONDS,
      cpus: cpus().length,
      load1mBefore: round(loadBefore),
      load1mAfter: round(loadavg()[0] ?? 0),
      node: process.version,
      phasesRun: [...PHASES],
      pgbench: pgbench && {
        tps: round(pgbench.tps),
        p50Ms: round(pgbench.latency.p50Ms),
        p99Ms: round(pgbench.latency.p99Ms),
      },
      phases: rows.map((row) => ({
        ...row,
        opsPerSec: round(row.opsPerSec),
        p50Ms: round(row.p50Ms),
        p99Ms: round(row.p99Ms),
        ratio: round(row.ratio, 3),
        met: row.target === null ? null : row.ratio >= row.target,
      })),
      batchSizes,
      storm: storm && {
        callers: STORM_CALLERS,
        rounds: STORM_ROUNDS,
        created: storm.created,
        replayed: storm.replayed,
        failed: storm.failed,
        maxMs: round(storm.latency.maxMs),
      },
      history: history && {
        operations: history.operations,
        loadSeconds: round(history.loadSeconds),
        loadPerSec: round(history.loadPerSec),
        reads: history.reads.map((read) => ({
          name: read.name,
          p50Ms: round(read.latency.p50Ms),
          p99Ms: round(read.latency.p99Ms),
          met: read.met,
          plan: read.plan,
        })),
      },
      violations,
    },
    RESULTS_FILE,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
