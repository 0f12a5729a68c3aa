import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { cpus } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createApiKey, createTenant, openDatabase, rowsOf } from '@idem/core';
import { createIdemClient, withdrawalKey } from '@idem/sdk';
import { sql } from 'drizzle-orm';
import { getAddress } from 'viem';
import { startServerProcess } from '../test/support/server-process.ts';
import { fundAccounts, scratchDatabase } from './support.ts';

/**
 * `pnpm bench` (server): N concurrent SDK clients creating withdrawals over HTTP (tRPC), then N plain
 * HTTP clients on the REST face, against the real server on PostgreSQL, next to pgbench's TPC-B-like script on the same server in the same run,
 * and to the core bench's direct figure (bench-results/core.json) when it is there. Exits non-zero
 * only if the database disagrees with what the clients were told.
 */
const run = promisify(execFile);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const CLIENTS = 16;
const ACCOUNTS = 1_000;
const TARGET_RATIO = 0.4;
/**
 * The server's PostgreSQL pool. On 2 cores shared by PostgreSQL, the server and the clients, a few
 * connections beat many (16 gave about 900 ops/s when 4 gave 1,150-1,380): postgres.js pipelines
 * the one-statement submissions on a busy connection, and fewer backends contend less. Between 3
 * and 4 the difference is within the noise, but 3 varied less: ratio 0.416-0.461 over 8 runs
 * against 0.362-0.504 for 4 over 8 runs interleaved with them.
 */
const SERVER_POOL = Number(process.env.BENCH_SERVER_POOL ?? 3);
const TARGET_P99_MS = 25;
const RESULTS = fileURLToPath(new URL('../../../bench-results/', import.meta.url));

async function pgbenchTps(): Promise<number> {
  const scratch = await scratchDatabase('idem_bench_http_pgbench');
  const binary = process.env.PGBENCH || 'pgbench';
  try {
    await run(binary, ['-i', '-s', '10', '-q', scratch.url], { maxBuffer: 16 << 20 });
    const { stdout } = await run(binary, ['-c', '8', '-j', '2', '-T', String(SECONDS), scratch.url], {
      maxBuffer: 16 << 20,
    });
    const tps = /^tps = ([0-9.]+)/m.exec(stdout)?.[1];
    if (!tps) throw new Error(`pgbench printed no tps:\n${stdout}`);
    return Number(tps);
  } finally {
    await scratch.drop();
  }
}

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0;
}

function coreFigure(): number | null {
  const file = `${RESULTS}core.json`;
  if (!existsSync(file)) return null;
  const core = JSON.parse(readFileSync(file, 'utf8')) as {
    phases?: { name: string; connections: number; opsPerSec: number }[];
  };
  return (
    core.phases?.find((p) => p.name === 'create, many accounts' && p.connections === CLIENTS)?.opsPerSec ??
    null
  );
}

async function main() {
  console.log(`idem server bench: ${CLIENTS} SDK clients, ${SECONDS}s, ${cpus().length} CPUs shared by all`);
  console.log('pgbench TPC-B-like, scale 10, -c 8 -j 2 ...');
  const tps = await pgbenchTps();
  console.log(`pgbench: ${tps.toFixed(0)} tps`);

  const scratch = await scratchDatabase('idem_bench_http');
  const setup = await openDatabase({ url: scratch.url, maxConnections: 8 });
  let failed = false;
  try {
    await setup.migrate();
    const { tenantId } = await createTenant(setup.db, { name: 'bench http' });
    const accounts = Array.from({ length: ACCOUNTS }, (_, i) => `acct-${i}`);
    await fundAccounts(setup.db, tenantId, accounts);
    const { apiKey } = await createApiKey(setup.db, tenantId);

    const server = await startServerProcess(
      {
        DATABASE_URL: scratch.url,
        IDEM_DB_POOL_MAX: String(SERVER_POOL),
        LOG_LEVEL: 'warn',
        IDEM_RATE_LIMIT_PER_SECOND: '1000000',
        NODE_ENV: 'production',
      },
      // The flags `pnpm start` runs the server with (a larger young generation: fewer scavenges
      // per request), plus any given for a profile.
      ['--max-semi-space-size=32', ...(process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [])],
    );
    type Submit = (withdrawalId: string, accountId: string) => Promise<'CREATED' | 'REPLAYED'>;
    /** CLIENTS concurrent callers for SECONDS after a warm-up; latency samples after the warm-up. */
    const load = async (prefix: string, clientFor: (client: number) => Submit) => {
      const samples: number[] = [];
      let created = 0;
      let errors = 0;
      const warmupEnds = performance.now() + Math.min(2_000, SECONDS * 200);
      const ends = warmupEnds + SECONDS * 1000;
      let sequence = 0;
      await Promise.all(
        Array.from({ length: CLIENTS }, async (_, client) => {
          const submit = clientFor(client);
          for (;;) {
            const started = performance.now();
            if (started >= ends) return;
            sequence += 1;
            try {
              const outcome = await submit(
                `${prefix}${client}-${sequence}`,
                accounts[sequence % ACCOUNTS] ?? 'acct-0',
              );
              if (outcome === 'CREATED') created += 1;
              if (started >= warmupEnds) samples.push(performance.now() - started);
            } catch {
              errors += 1;
            }
          }
        }),
      );
      return { samples, created, errors };
    };
    const destination = getAddress(`0x${randomBytes(20).toString('hex')}`);
    let trpc: Awaited<ReturnType<typeof load>>;
    let rest: Awaited<ReturnType<typeof load>>;
    try {
      // The tRPC face through the SDK (its undici keep-alive pool).
      trpc = await load('b', () => {
        const idem = createIdemClient({ baseUrl: server.baseUrl, apiKey });
        return async (withdrawalId, accountId) =>
          (
            await idem.withdrawals.submit(
              { withdrawalId, accountId, asset: 'ETH', destination, amountMinor: '1000' },
              withdrawalKey(withdrawalId),
            )
          ).outcome;
      });
      // The REST face as a non-TypeScript integrator calls it: plain HTTP/1.1, one keep-alive connection each.
      rest = await load('r', () => {
        const agent = new Agent({ keepAlive: true, maxSockets: 1 });
        return (withdrawalId, accountId) =>
          restSubmit(server.baseUrl, agent, apiKey, withdrawalKey(withdrawalId), {
            withdrawalId,
            accountId,
            asset: 'ETH',
            destination,
            amountMinor: '1000',
          });
      });
    } finally {
      await server.stop();
    }
    const created = trpc.created + rest.created;
    const errors = trpc.errors + rest.errors;

    // What the clients were told must be what the database holds.
    const stored = rowsOf<{ n: string | number }>(
      await setup.db.execute(sql`select count(*) as n from operations where kind = 'withdrawal'`),
    );
    const held = rowsOf<{ h: string }>(
      await setup.db.execute(sql`select coalesce(sum(held), 0)::text as h from balances`),
    );
    const correct =
      Number(stored[0]?.n) === created &&
      BigInt(held[0]?.h ?? '0') === BigInt(created) * 1000n &&
      errors === 0;
    failed = !correct;

    const core = coreFigure();
    const figures = (samples: number[]) => {
      const sorted = Float64Array.from(samples).sort();
      const opsPerSec = samples.length / SECONDS;
      return {
        ops: samples.length,
        opsPerSec: Math.round(opsPerSec * 100) / 100,
        p50Ms: Math.round(percentile(sorted, 0.5) * 100) / 100,
        p99Ms: Math.round(percentile(sorted, 0.99) * 100) / 100,
        ratioToPgbench: Math.round((opsPerSec / tps) * 1000) / 1000,
        met: opsPerSec / tps >= TARGET_RATIO && percentile(sorted, 0.99) < TARGET_P99_MS,
      };
    };
    const trpcFigures = figures(trpc.samples);
    const restFigures = figures(rest.samples);
    const result = {
      clients: CLIENTS,
      serverPool: SERVER_POOL,
      seconds: SECONDS,
      cpus: cpus().length,
      ...trpcFigures,
      pgbenchTps: Math.round(tps * 100) / 100,
      coreOpsPerSec: core,
      ratioToCore: core ? Math.round((trpcFigures.opsPerSec / core) * 1000) / 1000 : null,
      /** The REST face (plain HTTP/1.1 keep-alive, same server, same run). */
      rest: restFigures,
      target: { ratioToPgbench: TARGET_RATIO, p99Ms: TARGET_P99_MS },
      errors,
      correct,
    };
    for (const [face, f] of [
      ['http tRPC (SDK)', trpcFigures],
      ['http REST', restFigures],
    ] as const) {
      console.log(
        `${face} (server pool ${SERVER_POOL}): ${f.opsPerSec} ops/s, p50 ${f.p50Ms} ms, p99 ${f.p99Ms} ms, ` +
          `x pgbench ${f.ratioToPgbench} (target >= ${TARGET_RATIO}, p99 < ${TARGET_P99_MS} ms: ${f.met ? 'MET' : 'MISSED'})`,
      );
    }
    console.log(`x core ${result.ratioToCore ?? 'n/a'}, correct ${correct ? 'yes' : 'NO'}`);
    console.log(`BENCH_JSON ${JSON.stringify({ bench: 'server-http', ...result })}`);
    await mkdir(dirname(`${RESULTS}server.json`), { recursive: true });
    await writeFile(`${RESULTS}server.json`, `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    await setup.close();
    await scratch.drop();
  }
  if (failed) process.exit(1);
}

/** One POST /v1/withdrawals over a keep-alive agent; the outcome from the status (201 or 200 replayed). */
function restSubmit(
  baseUrl: string,
  agent: Agent,
  apiKey: string,
  key: string,
  body: Record<string, string>,
): Promise<'CREATED' | 'REPLAYED'> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const call = request(
      `${baseUrl}/v1/withdrawals`,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${apiKey}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          'idempotency-key': key,
        },
      },
      (response) => {
        response.resume();
        response.on('end', () => {
          if (response.statusCode === 201) resolve('CREATED');
          else if (response.statusCode === 200) resolve('REPLAYED');
          else reject(new Error(`REST answered ${response.statusCode}`));
        });
      },
    );
    call.on('error', reject);
    call.end(payload);
  });
}

await main();
