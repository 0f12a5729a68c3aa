import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ALL_API_KEY_SCOPES,
  createApiKey,
  createTenant,
  type Database,
  openDatabase,
  rowsOf,
} from '@idem/core';
import { pgbenchTps, runPgbench } from '@idem/testing/bench';
import { type ServerProcess, startServerProcess } from '@idem/testing/server';
import { sql } from 'drizzle-orm';
import { Client as UndiciClient } from 'undici';
import { getAddress } from 'viem';
import { bundle } from '../scripts/bundle.ts';
import { bulkCaller, type Integrator, postWithdrawal, restClient, sdkClient } from './clients.ts';
import { startHttpFloor } from './http-floor.ts';
import { LoadGenerator } from './load.ts';
import {
  createMeter,
  type Figures,
  figuresOf,
  type Gathering,
  METRICS_TOKEN,
  type Measured,
} from './measure.ts';
import { fundAccounts, scratchDatabase } from './support.ts';

/**
 * `pnpm bench` (server): N concurrent SDK clients creating withdrawals over HTTP (tRPC), then N plain
 * HTTP clients on the REST face, against the real server on PostgreSQL, next to pgbench's TPC-B-like script on the same server in the same run,
 * and to the core bench's direct figure (bench-results/core.json) when it is there. Exits non-zero
 * only if the database disagrees with what the clients were told.
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const ACCOUNTS = 1_000;
const HOT_ACCOUNT = 'acct-hot';
/** The throughput target: over HTTP at least pgbench's TPC-B rate; one hot account at least half of it. */
const TARGET_RATIO = 1.0;
const HOT_TARGET_RATIO = 0.5;
/** The bulk API phase: this many integrators, each sending this many withdrawals per call. */
const BULK_CLIENTS = 4;
const BULK_ITEMS = 250;
/** The REST face's target: at least 0.4 times pgbench. */
const REST_TARGET_RATIO = 0.4;
/**
 * The server's PostgreSQL pool. On 2 cores shared by PostgreSQL, the server and the clients, a few
 * connections beat many (16 gave about 900 ops/s when 4 gave 1,150-1,380): postgres.js pipelines
 * the one-statement submissions on a busy connection, and fewer backends contend less. Between 3
 * and 4 the difference is within the noise, but 3 varied less: ratio 0.416-0.461 over 8 runs
 * against 0.362-0.504 for 4 over 8 runs interleaved with them.
 */
const SERVER_POOL = Number(process.env.BENCH_SERVER_POOL ?? 3);
/**
 * The server's batching settings: the product's defaults unless IDEM_BATCH_CONCURRENCY or
 * IDEM_BATCH_MAX_WAIT_MS or IDEM_BATCH_GATHER_FROM is set (docs/BENCHMARKS.md compares settings).
 */
const BATCH_CONCURRENCY = process.env.IDEM_BATCH_CONCURRENCY;
const BATCH_MAX_WAIT_MS = process.env.IDEM_BATCH_MAX_WAIT_MS;
const BATCH_GATHER_FROM = process.env.IDEM_BATCH_GATHER_FROM;
const TARGET_P99_MS = 25;
/** Each phase's calls before its measured window, not counted in its figures. */
const PHASE_WARMUP_MS = Math.min(2_000, SECONDS * 200);
/**
 * The server's warm-up before the first phase (BENCH_WARMUP_SECONDS, 0 to skip): 16 SDK clients
 * whose calls count in no phase. A new server's rate climbs for its first 5 to 20 s of such load
 * (docs/BENCHMARKS.md, "The server's start-up ramp"), which a long-running server does not do;
 * each run prints its ramp, a second at a time, so a reader sees whether the warm-up was enough.
 */
const SERVER_WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 15);
if (!(Number.isInteger(SERVER_WARMUP_SECONDS) && SERVER_WARMUP_SECONDS >= 0)) {
  throw new Error('BENCH_WARMUP_SECONDS must be a whole number of seconds, 0 or more');
}
/** The open-loop phase's arrivals per second (default: half the 16-client closed loop's rate). */
const OPEN_RATE = process.env.BENCH_OPEN_RATE ? Number(process.env.BENCH_OPEN_RATE) : undefined;
if (OPEN_RATE !== undefined && !(Number.isInteger(OPEN_RATE) && OPEN_RATE > 0)) {
  throw new Error('BENCH_OPEN_RATE must be a positive whole number of calls per second');
}
/** `BENCH_ONLY=rest,bulk` runs only those phases (trpc16, trpc64, rest, hot, open, bulk, one, floor): for profiling one path. */
const ONLY = process.env.BENCH_ONLY?.split(',').map((name) => name.trim());
const runs = (phase: string) => !ONLY || ONLY.includes(phase);
const RESULTS = fileURLToPath(new URL('../../../bench-results/', import.meta.url));

function coreFigure(): number | null {
  const file = `${RESULTS}core.json`;
  if (!existsSync(file)) return null;
  const core = JSON.parse(readFileSync(file, 'utf8')) as {
    phases?: { name: string; connections: number; opsPerSec: number }[];
  };
  return (
    core.phases?.find((p) => p.name === 'create, many accounts' && p.connections === 16)?.opsPerSec ?? null
  );
}

const ratio = (perSecond: number, tps: number) => Math.round((perSecond / tps) * 1000) / 1000;

type Phase = Figures & {
  createdPerCommit?: number;
  gathering?: Gathering;
  clients?: number;
  target?: number;
  met?: boolean;
  itemsPerSec?: number;
  itemsRatioToPgbench?: number;
  /** pgbench's rate in the runs just before and just after this phase; its ratios use their mean. */
  pgbenchAround?: [number, number];
};

/** pgbench at one client count: the database's own rate and latency. */
type PgbenchFigure = { tps: number; p50Ms: number; p99Ms: number };

/** Everything a phase needs: the load, its meter, the integrator's address and its accounts. */
interface Bench {
  server: ServerProcess;
  integrator: Integrator;
  load: LoadGenerator;
  measure: ReturnType<typeof createMeter>;
  phases: Record<string, Phase>;
  randomAccount: () => string;
}

async function main() {
  // The server runs from its bundle, as `pnpm start` runs it, built from the sources now.
  await bundle('server');
  console.log(`idem server bench: ${SECONDS}s per phase, ${cpus().length} CPUs shared by all`);
  // pgbench runs before and after the phases and the ratios use the mean: this machine's speed
  // drifts by a quarter over minutes, and one pgbench run alone moved the ratios as much.
  console.log('pgbench TPC-B-like, scale 10, -c 8 -j 2 ...');
  const tpsBefore = await pgbenchTps(SECONDS);
  yardstick.push(tpsBefore);
  console.log(`pgbench before the phases: ${tpsBefore.toFixed(0)} tps`);

  const scratch = await scratchDatabase('idem_bench_http');
  const setup = await openDatabase({ url: scratch.url, maxConnections: 8 });
  let failed = false;
  try {
    await setup.migrate();
    const { tenantId } = await createTenant(setup.db, { name: 'bench http' });
    const accounts = Array.from({ length: ACCOUNTS }, (_, i) => `acct-${i}`);
    await fundAccounts(setup.db, tenantId, [...accounts, HOT_ACCOUNT]);
    const { apiKey } = await createApiKey(setup.db, tenantId, {
      scopes: ALL_API_KEY_SCOPES,
      createdBy: 'bench',
    });
    const server = await startBenchServer(scratch.url);
    const bench: Bench = {
      server,
      integrator: {
        baseUrl: server.baseUrl,
        apiKey,
        destination: getAddress(`0x${randomBytes(20).toString('hex')}`),
      },
      load: new LoadGenerator({ warmupMs: PHASE_WARMUP_MS, seconds: SECONDS }),
      measure: createMeter(setup.db, server),
      phases: {},
      randomAccount: () => accounts[Math.floor(Math.random() * ACCOUNTS)] ?? 'acct-0',
    };
    try {
      await runPhases(bench);
    } finally {
      await server.stop();
    }
    const { total } = bench.load;
    const correct = await databaseAgrees(setup.db, total);
    failed = !correct;

    const tpsAfter = yardstick.at(-1) ?? tpsBefore;
    const tps = (tpsBefore + tpsAfter) / 2;
    const spread = spreadOf(yardstick);
    console.log(
      `pgbench around the phases: ${yardstick.map((x) => Math.round(x)).join(', ')} tps (median ${spread.median}, min ${spread.min}, max ${spread.max}); each phase's ratio uses the runs just before and after it`,
    );
    const pgbenchAtClients = await pgbenchAtJudgedClients(bench.phases);
    judgeAgainstPgbench(bench.phases, tps, pgbenchAtClients);

    const core = coreFigure();
    const result = {
      serverPool: SERVER_POOL,
      batchConcurrency: BATCH_CONCURRENCY ? Number(BATCH_CONCURRENCY) : 'default',
      batchMaxWaitMs: BATCH_MAX_WAIT_MS ? Number(BATCH_MAX_WAIT_MS) : 'default',
      batchGatherFrom: BATCH_GATHER_FROM ? Number(BATCH_GATHER_FROM) : 'default',
      batching: process.env.IDEM_BATCHING ?? 'on',
      seconds: SECONDS,
      cpus: cpus().length,
      pgbenchTps: Math.round(tps * 100) / 100,
      pgbenchTpsBeforeAndAfter: [Math.round(tpsBefore), Math.round(tpsAfter)],
      pgbenchTpsSeries: yardstick.map((x) => Math.round(x)),
      pgbenchTpsSpread: spread,
      pgbenchAtClients,
      coreOpsPerSec: core,
      phases: bench.phases,
      target: {
        ratioToPgbench: TARGET_RATIO,
        rest: REST_TARGET_RATIO,
        hotAccount: HOT_TARGET_RATIO,
        p99Ms: TARGET_P99_MS,
      },
      created: total.created,
      errors: total.errors,
      correct,
    };
    console.log(`correct ${correct ? 'yes' : 'NO'} (${total.created} created, ${total.errors} errors)`);
    console.log(`BENCH_JSON ${JSON.stringify({ bench: 'server-http', ...result })}`);
    await mkdir(dirname(`${RESULTS}server.json`), { recursive: true });
    await writeFile(`${RESULTS}server.json`, `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    await setup.close();
    await scratch.drop();
  }
  if (failed) process.exit(1);
}

function startBenchServer(databaseUrl: string): Promise<ServerProcess> {
  return startServerProcess(
    {
      DATABASE_URL: databaseUrl,
      IDEM_DB_POOL_MAX: String(SERVER_POOL),
      ...(process.env.IDEM_BATCHING ? { IDEM_BATCHING: process.env.IDEM_BATCHING } : {}),
      ...(BATCH_CONCURRENCY ? { IDEM_BATCH_CONCURRENCY: BATCH_CONCURRENCY } : {}),
      ...(BATCH_MAX_WAIT_MS ? { IDEM_BATCH_MAX_WAIT_MS: BATCH_MAX_WAIT_MS } : {}),
      ...(BATCH_GATHER_FROM ? { IDEM_BATCH_GATHER_FROM: BATCH_GATHER_FROM } : {}),
      LOG_LEVEL: 'warn',
      IDEM_METRICS_TOKEN: METRICS_TOKEN,
      IDEM_RATE_LIMIT_PER_SECOND: '1000000',
      NODE_ENV: 'production',
    },
    // The flags `pnpm start` runs the server with (a larger young generation: fewer scavenges
    // per request), plus any given for a profile.
    ['--max-semi-space-size=32', ...(process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [])],
  );
}

/** The phases BENCH_ONLY names (all by default), in order, each judged as it ends. */
async function runPhases(bench: Bench): Promise<void> {
  const { load, measure, integrator, randomAccount } = bench;
  const sdk = () => sdkClient(integrator);
  const rest = () => restClient(integrator);
  if (SERVER_WARMUP_SECONDS > 0) {
    const perSecond: number[] = [];
    await load.closedLoop('w', 16, sdk, randomAccount, {
      warmupMs: 0,
      seconds: SERVER_WARMUP_SECONDS,
      perSecond,
    });
    console.log(
      `warm-up, 16 SDK clients for ${SERVER_WARMUP_SECONDS} s (in no phase), calls answered each second: ${Array.from({ length: SERVER_WARMUP_SECONDS }, (_, second) => perSecond[second] ?? 0).join(', ')}`,
    );
  }
  const trpc16 = runs('trpc16')
    ? await judge(
        bench.phases,
        'http tRPC (SDK), 16 clients',
        await measure(() => load.closedLoop('b', 16, sdk, randomAccount)),
        TARGET_RATIO,
        { clients: 16 },
      )
    : null;
  if (runs('trpc64'))
    await judge(
      bench.phases,
      'http tRPC (SDK), 64 clients',
      await measure(() => load.closedLoop('c', 64, sdk, randomAccount)),
      TARGET_RATIO,
      { clients: 64 },
    );
  if (runs('rest'))
    await judge(
      bench.phases,
      'http REST, 16 clients',
      await measure(() => load.closedLoop('r', 16, rest, randomAccount)),
      REST_TARGET_RATIO,
      { clients: 16 },
    );
  if (runs('hot'))
    await judge(
      bench.phases,
      'http tRPC (SDK), one hot account, 16 clients',
      await measure(() => load.closedLoop('h', 16, sdk, () => HOT_ACCOUNT)),
      HOT_TARGET_RATIO,
      { clients: 16 },
    );
  // Half the closed-loop maximum, arriving on a schedule: an idle-ish system's latency.
  // BENCH_OPEN_RATE fixes the rate, to compare settings (batching on and off) at one load.
  const openRate = OPEN_RATE ?? (trpc16 ? Math.max(1, Math.round(trpc16.opsPerSec / 2)) : undefined);
  if (openRate !== undefined && runs('open')) {
    const rate = openRate;
    await judge(
      bench.phases,
      `http tRPC (SDK), open loop at ${rate}/s`,
      await measure(() => load.openLoop('o', rate, sdk(), randomAccount)),
      null,
      { perSecond: rate },
    );
  }
  if (runs('bulk')) await bulkPhase(bench);
  if (runs('one'))
    await judge(
      bench.phases,
      'http tRPC (SDK), one client at a time',
      await measure(() => load.closedLoop('s', 1, sdk, randomAccount)),
      null,
      { clients: 1 },
    );
  if (runs('floor')) await floorPhase(bench);
}

/** The bulk API: a few integrators each sending BULK_ITEMS withdrawals per call. */
async function bulkPhase({ load, measure, integrator, randomAccount, phases }: Bench): Promise<void> {
  const bulkCall = bulkCaller(integrator, BULK_ITEMS, () => load.nextId('m'), randomAccount);
  const bulk = await measure(() => load.closedLoop('m', BULK_CLIENTS, () => bulkCall, randomAccount));
  // Each call was counted once; the database holds its items.
  load.total.created += bulk.tally.created * (BULK_ITEMS - 1);
  const bulkFigures = figuresOf(bulk.tally.samples, SECONDS);
  const itemsPerSec = Math.round(bulkFigures.opsPerSec * BULK_ITEMS);
  phases[`bulk API, ${BULK_CLIENTS} clients x ${BULK_ITEMS} items per call`] = {
    ...bulkFigures,
    cpuPerCall: bulk.cpu,
    itemsPerSec,
  };
  console.log(
    `bulk API, ${BULK_CLIENTS} clients x ${BULK_ITEMS} items per call: ${itemsPerSec} items/s, ` +
      `call p50 ${bulkFigures.p50Ms} ms, p99 ${bulkFigures.p99Ms} ms`,
  );
}

/**
 * The same REST clients against a Node server that only answers (bench/http-floor.ts) with the
 * body the real server gives a created withdrawal: the most any HTTP face can do here.
 */
async function floorPhase({
  server,
  load,
  measure,
  integrator,
  randomAccount,
  phases,
}: Bench): Promise<void> {
  const sample = await postWithdrawal(new UndiciClient(server.baseUrl), integrator, 'floor-sample', 'acct-0');
  const answer = await sample.body.text();
  if (sample.statusCode === 201) load.total.created += 1;
  const floor = await startHttpFloor(answer, ['--max-semi-space-size=32']);
  try {
    const floorRun = await measure(
      () => load.closedLoop('f', 16, () => restClient(integrator, floor.baseUrl), randomAccount),
      floor.pid,
    );
    // Its calls created nothing: they are not the database's to hold.
    load.total.created -= floorRun.tally.created;
    // Its commits are the bench's own reads: no batch size to report.
    await judge(
      phases,
      'http floor (a Node server that only answers), 16 REST clients',
      { ...floorRun, createdPerCommit: undefined },
      null,
      { clients: 16 },
    );
  } finally {
    await floor.stop();
  }
}

/** Records a phase's figures under `name` and prints them. */
/**
 * pgbench's rate, measured again after every phase: each phase is judged against the runs just
 * before and just after it (the machine's speed moves by a quarter within one run), and the whole
 * series is reported with its spread.
 */
const yardstick: number[] = [];

async function judge(
  phases: Record<string, Phase>,
  name: string,
  { tally, cpu, createdPerCommit, gathering }: Measured,
  target: number | null,
  extra: Record<string, unknown> = {},
): Promise<Figures> {
  const figures = { ...figuresOf(tally.samples, SECONDS), cpuPerCall: cpu };
  phases[name] = {
    ...figures,
    ...(createdPerCommit === undefined ? {} : { createdPerCommit }),
    ...(gathering === undefined ? {} : { gathering }),
    ...extra,
    ...(target === null ? {} : { target }),
  };
  console.log(
    `${name}: ${figures.opsPerSec} ops/s, p50 ${figures.p50Ms} ms, p99 ${figures.p99Ms} ms` +
      `; CPU ms per call: server ${cpu.serverMs}, PostgreSQL ${cpu.postgresMs}, clients ${cpu.clientsMs}` +
      (createdPerCommit === undefined ? '' : `; ${createdPerCommit} created per commit`) +
      (gathering === undefined
        ? ''
        : `; ${gathering.batches} batches, ${Math.round(gathering.aloneShare * 100)}% sent alone, ${gathering.meanBatchMs} ms each`) +
      (tally.errors ? `, ${tally.errors} errors` : ''),
  );
  const before = yardstick.length - 1;
  yardstick.push(await pgbenchTps(SECONDS));
  (phases[name] as Phase).pgbenchAround = [
    Math.round(yardstick[before] ?? 0),
    Math.round(yardstick[before + 1] ?? 0),
  ];
  console.log(`pgbench after this phase: ${Math.round(yardstick.at(-1) ?? 0)} tps`);
  return figures;
}

/** What the clients were told must be what the database holds. */
async function databaseAgrees(db: Database, total: { created: number; errors: number }): Promise<boolean> {
  const stored = rowsOf<{ n: string | number }>(
    await db.execute(sql`select count(*) as n from operations where kind = 'withdrawal'`),
  );
  const held = rowsOf<{ h: string }>(
    await db.execute(sql`select coalesce(sum(held), 0)::text as h from balances`),
  );
  return (
    Number(stored[0]?.n) === total.created &&
    BigInt(held[0]?.h ?? '0') === BigInt(total.created) * 1000n &&
    total.errors === 0
  );
}

/**
 * The latency half of the target beside PostgreSQL's own: pgbench at each judged phase's client
 * count (closed loop, like the phases), so a p99 is read against what the database alone reaches.
 */
async function pgbenchAtJudgedClients(phases: Record<string, Phase>): Promise<Record<number, PgbenchFigure>> {
  const pgbenchAtClients: Record<number, PgbenchFigure> = {};
  for (const clients of new Set(
    Object.values(phases).flatMap((phase) =>
      phase.target !== undefined && phase.clients !== undefined ? [phase.clients] : [],
    ),
  )) {
    const same = await runPgbench(SECONDS, { clients });
    pgbenchAtClients[clients] = {
      tps: Math.round(same.tps),
      p50Ms: Math.round(same.latency.p50Ms * 100) / 100,
      p99Ms: Math.round(same.latency.p99Ms * 100) / 100,
    };
    console.log(
      `pgbench at ${clients} clients (-j 2): ${Math.round(same.tps)} tps, p50 ${pgbenchAtClients[clients].p50Ms} ms, p99 ${pgbenchAtClients[clients].p99Ms} ms`,
    );
  }
  return pgbenchAtClients;
}

/** min, median and max of a series, rounded. */
function spreadOf(series: number[]): { min: number; median: number; max: number } {
  const sorted = [...series].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  return { min: Math.round(sorted[0] ?? 0), median: Math.round(median), max: Math.round(sorted.at(-1) ?? 0) };
}

/** Each phase's ratio to the pgbench runs around it, and whether it met its target; printed. */
function judgeAgainstPgbench(
  phases: Record<string, Phase>,
  tps: number,
  pgbenchAtClients: Record<number, PgbenchFigure>,
): void {
  for (const [name, phase] of Object.entries(phases)) {
    // The pgbench runs on either side of the phase, or the whole run's mean for a phase without.
    const around = phase.pgbenchAround?.every((x) => x > 0)
      ? (phase.pgbenchAround[0] + phase.pgbenchAround[1]) / 2
      : tps;
    phase.ratioToPgbench = ratio(phase.opsPerSec, around);
    if (phase.itemsPerSec !== undefined) phase.itemsRatioToPgbench = ratio(phase.itemsPerSec, around);
    // Latency is judged against PostgreSQL's own p99 at the same client count in the same run
    // (the absolute bound judged the machine: pgbench alone misses it on slow days).
    const own = phase.clients !== undefined ? pgbenchAtClients[phase.clients] : undefined;
    const p99Bound = own?.p99Ms ?? TARGET_P99_MS;
    if (phase.target !== undefined) {
      phase.met = phase.ratioToPgbench >= phase.target && phase.p99Ms <= p99Bound;
    }
    console.log(
      `${name}: x pgbench ${phase.itemsRatioToPgbench ?? phase.ratioToPgbench} (against ${Math.round(around)} tps)` +
        (phase.target === undefined
          ? ''
          : ` (target >= ${phase.target}, p99 <= ${own ? `pgbench's ${p99Bound} ms at ${phase.clients} clients` : `${p99Bound} ms`}: p99 ${phase.p99Ms} ms, ${phase.met ? 'MET' : 'MISSED'})`),
    );
  }
}

await main();
