/**
 * How the server bench measures a phase: throughput and latency of its answers, the CPU each call
 * cost in the server, its PostgreSQL backends and the clients, how many withdrawals each COMMIT held,
 * and the server's own account of its gathering (from /metrics).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { type Database, rowsOf } from '@idem/core';
import { sql } from 'drizzle-orm';

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0;
}

/**
 * With BENCH_PROFILE=<dir>, a V8 CPU profile of this process (the clients) during each phase,
 * written as <dir>/clients-phase-<n>.cpuprofile (the server's own: BENCH_SERVER_NODE_ARGS=--cpu-prof).
 */
export async function profileClients<T>(name: string, phase: () => Promise<T>): Promise<T> {
  const dir = process.env.BENCH_PROFILE;
  if (!dir) return phase();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  try {
    return await phase();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    await mkdir(dir, { recursive: true });
    await writeFile(`${dir}/clients-${name}.cpuprofile`, JSON.stringify(profile));
    session.disconnect();
  }
}

/** CPU seconds (user + system) a process has used, from /proc (Linux); 0 where it cannot be read. */
export function processCpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** The bench's own bearer token for the server's /metrics. */
export const METRICS_TOKEN = randomBytes(18).toString('base64url');

/** The server's gathering histograms so far (idem_withdrawal_batch_*), as /metrics reports them. */
export interface GatheringCounts {
  batches: number;
  alone: number;
  seconds: number;
}

export async function gatheringNow(baseUrl: string): Promise<GatheringCounts | null> {
  const response = await fetch(`${baseUrl}/metrics`, {
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  if (!response.ok) return null;
  const text = await response.text();
  const value = (pattern: string) => Number(new RegExp(`^${pattern} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return {
    batches: value('idem_withdrawal_batch_items_count'),
    alone: value('idem_withdrawal_batch_items_bucket\\{le="1"\\}'),
    seconds: value('idem_withdrawal_batch_seconds_sum'),
  };
}

/** How a phase's submissions were gathered: batches, the share sent alone, a batch's mean time. */
export interface Gathering {
  batches: number;
  aloneShare: number;
  meanBatchMs: number;
}

export function gatheringDuring(
  before: GatheringCounts | null,
  after: GatheringCounts | null,
): Gathering | undefined {
  if (!before || !after) return undefined;
  const batches = after.batches - before.batches;
  if (batches <= 0) return undefined;
  return {
    batches,
    aloneShare: Math.round(((after.alone - before.alone) / batches) * 100) / 100,
    meanBatchMs: Math.round(((after.seconds - before.seconds) / batches) * 1e5) / 100,
  };
}

/** Where the CPU went during a phase, per call: the server process, its PostgreSQL backends, the clients. */
export interface CpuSplit {
  serverMs: number;
  postgresMs: number;
  clientsMs: number;
}

export interface Figures {
  ops: number;
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Against the mean of pgbench before and after the phases (filled in at the end). */
  ratioToPgbench?: number;
  cpuPerCall?: CpuSplit;
}

/** Throughput over the measured window and latency percentiles of its samples. */
export function figuresOf(samples: number[], seconds: number): Figures {
  const sorted = Float64Array.from(samples).sort();
  return {
    ops: samples.length,
    opsPerSec: Math.round((samples.length / seconds) * 100) / 100,
    p50Ms: Math.round(percentile(sorted, 0.5) * 100) / 100,
    p99Ms: Math.round(percentile(sorted, 0.99) * 100) / 100,
  };
}

export type Submit = (withdrawalId: string, accountId: string) => Promise<'CREATED' | 'REPLAYED'>;

export interface Tally {
  samples: number[];
  created: number;
  errors: number;
}

/** What `measure` returns of a phase: its tally and where the CPU went. */
export interface Measured {
  tally: Tally;
  cpu: CpuSplit;
  createdPerCommit?: number;
  gathering?: Gathering;
}

/**
 * Runs phases against `server` and attributes their CPU time per call (the warm-up included, as is
 * its share of calls); `db` reads the scratch database's backends and commits.
 */
export function createMeter(db: Database, server: { pid: number; baseUrl: string }) {
  let profiled = 0;
  return async (phase: () => Promise<Tally>, serverPid = server.pid): Promise<Measured> => {
    // Read first: the scrape's own work (a statistics read) stays out of the phase's figures.
    const gatheringBefore = serverPid === server.pid ? await gatheringNow(server.baseUrl) : null;
    const before = await cpuNow(db, serverPid);
    const commitsBefore = await commitsNow(db);
    profiled += 1;
    const tally = await profileClients(`phase-${profiled}`, phase);
    const after = await cpuNow(db, serverPid);
    // The statistics reach pg_stat_database within a second of a commit.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const commits = (await commitsNow(db)) - commitsBefore;
    // After the commits are counted: the scrape's own statistics read is not the phase's.
    const gatheringAfter = serverPid === server.pid ? await gatheringNow(server.baseUrl) : null;
    const calls = Math.max(1, tally.created + tally.errors);
    const per = (seconds: number) => Math.round((seconds / calls) * 1e6) / 1e3;
    return {
      tally,
      cpu: {
        serverMs: per(after.server - before.server),
        postgresMs: per(backendsDelta(before.postgres, after.postgres)),
        clientsMs: per(after.clients - before.clients),
      },
      // How many created withdrawals each COMMIT held: the batches' mean size (the bench's own
      // few reads count too, so slightly under).
      createdPerCommit: commits > 0 ? Math.round((tally.created / commits) * 100) / 100 : undefined,
      // The server's own account of its gathering (the bulk API's calls are not gathered).
      gathering: gatheringDuring(gatheringBefore, gatheringAfter),
    };
  };
}

async function backends(db: Database): Promise<number[]> {
  return rowsOf<{ pid: number }>(
    await db.execute(
      sql`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
    ),
  ).map((row) => row.pid);
}

/** CPU seconds so far of the server, each of its database backends, and this process (the clients). */
async function cpuNow(db: Database, serverPid: number) {
  return {
    server: processCpuSeconds(serverPid),
    postgres: new Map((await backends(db)).map((pid) => [pid, processCpuSeconds(pid)] as const)),
    clients: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
  };
}

/**
 * The backends' CPU during a phase: each backend alive at its end, from 0 if it started during
 * it. A backend that exited during the phase is left out (its last reading is gone): subtracting
 * it, as a sum of sums did, once printed a negative figure.
 */
function backendsDelta(before: Map<number, number>, after: Map<number, number>): number {
  return [...after].reduce((sum, [pid, seconds]) => sum + seconds - (before.get(pid) ?? 0), 0);
}

/** Transactions committed in the scratch database so far (PostgreSQL's statistics, flushed within a second). */
async function commitsNow(db: Database): Promise<number> {
  return Number(
    rowsOf<{ n: string }>(
      await db.execute(
        sql`select xact_commit::text as n from pg_stat_database where datname = current_database()`,
      ),
    )[0]?.n ?? 0,
  );
}
