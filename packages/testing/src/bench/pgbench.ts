import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { LatencyRecorder, type LatencySummary } from './latency.ts';
import { createScratchDatabase } from './scratch.ts';

const run = promisify(execFile);

/** The discarded pgbench run before each measured one (BENCH_PGBENCH_WARMUP_SECONDS, 0 to skip). */
const WARMUP_SECONDS = Number(process.env.BENCH_PGBENCH_WARMUP_SECONDS ?? 5);

export interface PgbenchResult {
  tps: number;
  latency: LatencySummary;
}

/**
 * The yardstick: pgbench's TPC-B-like script (scale 10, 8 clients by default, 2 threads) on the same
 * server, in its own scratch database. Per-transaction logs (`-l`) give p50/p99 comparable to ours;
 * run at a phase's own client count, they show what PostgreSQL's latency is at that concurrency.
 */
export async function runPgbench(
  seconds: number,
  options: { clients?: number } = {},
): Promise<PgbenchResult> {
  const logDir = await mkdtemp(join(tmpdir(), 'idem-pgbench-'));
  try {
    const tps = await runScript(seconds, options.clients ?? 8, ['-l', `--log-prefix=${join(logDir, 'tx')}`]);
    return { tps, latency: await readLatencies(logDir) };
  } finally {
    await rm(logDir, { recursive: true, force: true });
  }
}

/**
 * The same script's rate alone, without per-transaction logs (writing them costs pgbench a little):
 * the yardstick for ratios that need no latencies, as the server bench's have always been taken.
 */
export async function pgbenchTps(seconds: number, options: { clients?: number } = {}): Promise<number> {
  return runScript(seconds, options.clients ?? 8, []);
}

async function runScript(seconds: number, clients: number, logArgs: string[]): Promise<number> {
  const binary = process.env.PGBENCH || 'pgbench';
  const scratch = await createScratchDatabase('idem_bench_pgbench');
  try {
    await run(binary, ['-i', '-s', '10', '-q', scratch.url], { maxBuffer: 16 << 20 });
    // A discarded run first: a freshly initialised database's first seconds (cold cache, WAL files
    // created for the first time) ran a third slower than the same run a minute later.
    if (WARMUP_SECONDS > 0)
      await run(binary, ['-c', String(clients), '-j', '2', '-T', String(WARMUP_SECONDS), scratch.url], {
        maxBuffer: 16 << 20,
      });
    const { stdout } = await run(
      binary,
      ['-c', String(clients), '-j', '2', '-T', String(seconds), ...logArgs, scratch.url],
      { maxBuffer: 16 << 20 },
    );
    return parseTps(stdout);
  } finally {
    await scratch.drop();
  }
}

/** `tps = 4123.456789 (without initial connection time)` */
export function parseTps(stdout: string): number {
  const match = /^tps = ([0-9.]+)/m.exec(stdout);
  if (!match?.[1]) throw new Error(`pgbench printed no tps line:\n${stdout}`);
  return Number(match[1]);
}

/** Each log line: client_id transaction_no time_us script_no epoch_s epoch_us. */
async function readLatencies(logDir: string): Promise<LatencySummary> {
  const recorder = new LatencyRecorder();
  for (const file of await readdir(logDir)) {
    const text = await readFile(join(logDir, file), 'utf8');
    for (const line of text.split('\n')) {
      const micros = Number(line.split(' ')[2]);
      if (line.length > 0 && Number.isFinite(micros)) recorder.record(micros / 1000);
    }
  }
  return recorder.summary();
}
