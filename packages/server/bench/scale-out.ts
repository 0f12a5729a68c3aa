/**
 * `pnpm bench` (server), scale-out phase: 1, 2 and 4 server processes on one
 * PostgreSQL, each on its own port, the load generator spreading its SDK clients over them round
 * robin (what a load balancer does). Prints withdrawals created per second per setup and checks
 * after each that the database holds exactly what the clients were told: one operation per
 * acknowledged call, holds equal to the sum of their amounts. On a 2-core machine shared by
 * PostgreSQL, the servers and the clients the figures flatten; the bench runs unchanged on a bigger
 * machine. Then 1, 2 and 4 worker processes drain a backlog to CONFIRMED on anvil. Writes
 * bench-results/scale-out.json.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import {
  ALL_API_KEY_SCOPES,
  createApiKey,
  createTenant,
  createWithdrawal,
  type DatabaseHandle,
  openDatabase,
  recordDeposit,
  registerHotWallet,
  rowsOf,
  setRiskPolicy,
  withTenant,
  withTenantAsConnection,
} from '@idem/core';
import { anvilDevPrivateKeys, startAnvil } from '@idem/rails';
import { createIdemClient, withdrawalKey } from '@idem/sdk';
import { startServerProcess } from '@idem/testing/server';
import { sql } from 'drizzle-orm';
import { createPublicClient, getAddress, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { bundle, CLI_BUNDLE } from '../scripts/bundle.ts';
import { fundAccounts, scratchDatabase } from './support.ts';

const SECONDS = Number(process.env.BENCH_SCALE_SECONDS ?? 10);
const CLIENTS = 16;
const ACCOUNTS = 200;
const SERVER_POOL = Number(process.env.BENCH_SERVER_POOL ?? 3);
const SETUPS = (process.env.BENCH_SCALE_SETUPS ?? '1,2,4').split(',').map(Number);
/** `servers`, `workers` or both (the default): a phase can be rerun alone. */
const PHASES = (process.env.BENCH_SCALE_PHASES ?? 'servers,workers').split(',');
const DRAIN_SECONDS_MAX = Number(process.env.BENCH_DRAIN_SECONDS ?? 300);
const RESULTS = fileURLToPath(new URL('../../../bench-results/', import.meta.url));
const SERVER_ROOT = fileURLToPath(new URL('../', import.meta.url));
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 120);
const WALLETS = 4;

interface SetupResult {
  servers: number;
  created: number;
  errors: number;
  opsPerSec: number;
  /**
   * PostgreSQL's own time per creation: idem_create_withdrawal's total time over its calls
   * (pg_stat_user_functions, track_functions = pl on the scratch database), so the cost on the
   * primary apart from Node, HTTP and the network.
   */
  pgMsPerCreation: number | null;
  correct: boolean;
}

async function runSetup(servers: number): Promise<SetupResult> {
  const { url, drop } = await scratchDatabase('idem_bench_scale');
  const setup = await openDatabase({ url, maxConnections: 8 });
  try {
    await setup.migrate();
    // Sessions opened from now on (the servers') count time in PL/pgSQL functions.
    await setup.db.execute(
      sql.raw(`alter database "${new URL(url).pathname.slice(1)}" set track_functions = 'pl'`),
    );
    const { tenantId } = await createTenant(setup.db, { name: `bench scale ${servers}` });
    const accounts = Array.from({ length: ACCOUNTS }, (_, i) => `acct-${i}`);
    await fundAccounts(setup.db, tenantId, accounts);
    const { apiKey } = await createApiKey(setup.db, tenantId, {
      scopes: ALL_API_KEY_SCOPES,
      createdBy: 'bench',
    });
    const processes = await Promise.all(
      Array.from({ length: servers }, () =>
        startServerProcess(
          {
            DATABASE_URL: url,
            IDEM_DB_POOL_MAX: String(SERVER_POOL),
            LOG_LEVEL: 'warn',
            IDEM_RATE_LIMIT_PER_SECOND: '1000000',
            IDEM_MIGRATE_ON_START: 'false',
            NODE_ENV: 'production',
          },
          ['--max-semi-space-size=32'],
        ),
      ),
    );
    let created = 0;
    let errors = 0;
    let measured = 0;
    try {
      const destination = getAddress(`0x${randomBytes(20).toString('hex')}`);
      const warmupEnds = performance.now() + 2_000;
      const ends = warmupEnds + SECONDS * 1000;
      let sequence = 0;
      await Promise.all(
        Array.from({ length: CLIENTS }, async (_, client) => {
          // Round robin: client i talks to server i mod N, as behind a load balancer.
          const server = processes[client % servers];
          if (!server) throw new Error('no server');
          const idem = createIdemClient({ baseUrl: server.baseUrl, apiKey });
          for (;;) {
            const started = performance.now();
            if (started >= ends) return;
            sequence += 1;
            const withdrawalId = `s${servers}-${client}-${sequence}`;
            try {
              const result = await idem.withdrawals.submit(
                {
                  withdrawalId,
                  accountId: accounts[sequence % ACCOUNTS] ?? 'acct-0',
                  asset: 'ETH',
                  destination,
                  amountMinor: '1000',
                },
                withdrawalKey(withdrawalId),
              );
              if (result.outcome === 'CREATED') created += 1;
              if (started >= warmupEnds) measured += 1;
            } catch {
              errors += 1;
            }
          }
        }),
      );
    } finally {
      await Promise.all(processes.map((p) => p.stop()));
    }
    const stored = rowsOf<{ n: number }>(
      await setup.db.execute(sql`select count(*)::int as n from operations where kind = 'withdrawal'`),
    );
    const held = rowsOf<{ h: string }>(
      await setup.db.execute(sql`select coalesce(sum(held), 0)::text as h from balances`),
    );
    // The servers' sessions have ended, so their function statistics are flushed.
    const [cost] = rowsOf<{ calls: number; ms: number }>(
      await setup.db.execute(
        sql`select calls::int, total_time::float8 as ms from pg_stat_user_functions where funcname = 'idem_create_withdrawal'`,
      ),
    );
    const pgMsPerCreation = cost && cost.calls > 0 ? Math.round((cost.ms / cost.calls) * 1000) / 1000 : null;
    const correct =
      stored[0]?.n === created && BigInt(held[0]?.h ?? '0') === BigInt(created) * 1000n && errors === 0;
    return {
      servers,
      created,
      errors,
      opsPerSec: Math.round((measured / SECONDS) * 10) / 10,
      pgMsPerCreation,
      correct,
    };
  } finally {
    await setup.close();
    await drop();
  }
}

interface WorkerSetupResult {
  workers: number;
  withdrawals: number;
  seconds: number;
  perSecond: number;
  /** On chain: each hot wallet's nonce moved by exactly its withdrawals (one transfer each). */
  transfers: number;
  correct: boolean;
  problems: string[];
}

/** A worker process as an operator runs it (`pnpm idem worker`, the CLI bundle), until stopped. */
async function startWorkerProcess(id: string, env: Record<string, string>): Promise<() => Promise<void>> {
  const child = spawn(process.execPath, [CLI_BUNDLE, 'worker', '--id', id], {
    cwd: SERVER_ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker ${id} did not start`)), 60_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString('utf8').includes('"worker-started"')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`worker ${id} exited with ${code}`)));
  });
  return async () => {
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
}

/**
 * 1, 2 and 4 worker processes drain a backlog of withdrawals to CONFIRMED on anvil (auto-mining,
 * depth 1), one fresh database per setup, the same four hot wallets.
 */
async function runWorkerSetup(workers: number, rpcUrl: string): Promise<WorkerSetupResult> {
  const chain = createPublicClient({ transport: http(rpcUrl) });
  const { url, drop } = await scratchDatabase('idem_bench_drain');
  const db: DatabaseHandle = await openDatabase({ url, maxConnections: 4 });
  try {
    await db.migrate();
    const tenants: { tenantId: string; address: Hex }[] = [];
    for (let w = 1; w <= WALLETS; w += 1) {
      const { tenantId } = await createTenant(db.db, {
        name: `drain ${workers}-${w}`,
        assets: [{ code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 1 }],
      });
      const address = privateKeyToAccount(anvilDevPrivateKeys[w] as Hex).address;
      // As the deployment's own tools (the tables' owner): the application's role may add no hot
      // wallet, set no rule that auto-approves, credit nothing without its evidence.
      await withTenantAsConnection(db.db, tenantId, async (tx) => {
        await registerHotWallet(tx, {
          tenantId,
          network: 'ethereum',
          address,
          keyRef: `dev:${w}`,
          nextNonce: await chain.getTransactionCount({ address, blockTag: 'pending' }),
        });
        await setRiskPolicy(tx, {
          tenantId,
          assetCode: 'ETH',
          autoApproveMaxMinor: (10n ** 19n).toString(),
          fourEyesMinMinor: (10n ** 20n).toString(),
          velocityMaxPerHour: 1_000_000,
          actor: 'bench',
        });
        await recordDeposit(tx, {
          tenantId,
          deposit: {
            reference: 'fund',
            accountId: 'acct',
            asset: 'ETH',
            amountMinor: (10n ** 21n).toString(),
          },
          idempotencyKey: 'fund',
          actor: 'bench',
        });
      });
      tenants.push({ tenantId, address });
    }
    const noncesBefore = await Promise.all(
      tenants.map((t) => chain.getTransactionCount({ address: t.address, blockTag: 'latest' })),
    );
    const env = {
      DATABASE_URL: url,
      IDEM_DB_POOL_MAX: '3',
      IDEM_EVM_RPC_URL: rpcUrl,
      IDEM_EVM_CHAIN_ID: '31337',
      // The production default unless told: a shorter interval adds idle passes per process, which
      // on a small machine take the CPU the draining needs (each worker polls every stage).
      IDEM_WORKER_INTERVAL_MS: process.env.BENCH_WORKER_INTERVAL_MS ?? '1000',
      LOG_LEVEL: 'warn',
      NODE_ENV: 'test',
    };
    // The workers are up before the backlog exists: a process start (seconds under load, more the
    // more processes start at once) is not drain time.
    const stops = await Promise.all(
      Array.from({ length: workers }, (_, w) => startWorkerProcess(`drain-${workers}-${w}`, env)),
    );
    const started = performance.now();
    let confirmed = 0;
    try {
      // One transaction per hot wallet's tenant: its share of the backlog appears at once.
      await Promise.all(
        tenants.map((tenant, t) =>
          withTenant(db.db, tenant.tenantId, async (tx) => {
            for (let i = t; i < BACKLOG; i += WALLETS) {
              const withdrawalId = `d${workers}-${i}`;
              await createWithdrawal(tx, {
                tenantId: tenant.tenantId,
                request: {
                  withdrawalId,
                  accountId: 'acct',
                  asset: 'ETH',
                  destination: getAddress(`0x${randomBytes(20).toString('hex')}`),
                  amountMinor: String(1_000_000 + i),
                },
                idempotencyKey: `withdrawal-${withdrawalId}`,
              });
            }
          }),
        ),
      );
      while (confirmed < BACKLOG && performance.now() - started < DRAIN_SECONDS_MAX * 1000) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        const [row] = rowsOf<{ n: number }>(
          await db.db.execute(
            sql`select count(*)::int as n from operations where kind = 'withdrawal' and state = 'CONFIRMED'`,
          ),
        );
        confirmed = row?.n ?? 0;
      }
    } finally {
      await Promise.all(stops.map((stop) => stop()));
    }
    const seconds = (performance.now() - started) / 1000;
    const problems: string[] = [];
    if (confirmed < BACKLOG) {
      // Where the rest stopped, so a slow drain names its stage.
      const rest = rowsOf<{ state: string; waiting: string | null; n: number }>(
        await db.db.execute(
          sql`select state, waiting_reason as waiting, count(*)::int as n from operations
              where kind = 'withdrawal' and state <> 'CONFIRMED' group by 1, 2 order by 3 desc`,
        ),
      );
      problems.push(
        `only ${confirmed} of ${BACKLOG} confirmed; the rest: ${rest.map((r) => `${r.n} ${r.state}${r.waiting ? ` (${r.waiting})` : ''}`).join(', ')}`,
      );
    }
    const noncesAfter = await Promise.all(
      tenants.map((t) => chain.getTransactionCount({ address: t.address, blockTag: 'latest' })),
    );
    const transfers = noncesAfter.reduce((sum, n, i) => sum + (n - (noncesBefore[i] ?? 0)), 0);
    // Every transfer consumes its wallet's nonce: more nonces than withdrawals is a double transfer.
    if (transfers !== BACKLOG) problems.push(`${transfers} transfers on chain for ${BACKLOG} withdrawals`);
    const [holds] = rowsOf<{ h: string }>(
      await db.db.execute(sql`select coalesce(sum(held), 0)::text as h from balances`),
    );
    if (holds?.h !== '0') problems.push(`holds left after every withdrawal confirmed: ${holds?.h}`);
    return {
      workers,
      withdrawals: BACKLOG,
      seconds: Math.round(seconds * 100) / 100,
      perSecond: Math.round((BACKLOG / seconds) * 10) / 10,
      transfers,
      correct: problems.length === 0,
      problems,
    };
  } finally {
    await db.close();
    await drop();
  }
}

const results: SetupResult[] = [];
// Servers and workers run from their bundles, as `pnpm start` and `pnpm idem worker` run them.
await Promise.all([bundle('server'), bundle('cli')]);
if (PHASES.includes('servers'))
  console.log(
    `idem server scale-out: ${CLIENTS} SDK clients round robin over 1, 2, 4 server processes (pool ${SERVER_POOL} each), ${SECONDS}s each, ${cpus().length} CPUs shared by all`,
  );
for (const servers of PHASES.includes('servers') ? SETUPS : []) {
  const result = await runSetup(servers);
  results.push(result);
  console.log(
    `  ${servers} server process(es): ${result.opsPerSec} withdrawals created/s, ${result.pgMsPerCreation ?? '?'} ms in PostgreSQL per creation, ${result.errors} errors, correct ${result.correct ? 'yes' : 'NO'}`,
  );
}
const anvil = await startAnvil({ chainId: 31337, mining: 'auto', accounts: 10 });
const drains: WorkerSetupResult[] = [];
if (PHASES.includes('workers'))
  console.log(
    `idem worker scale-out: a backlog of ${BACKLOG} withdrawals over ${WALLETS} hot wallets drained to CONFIRMED on anvil by 1, 2, 4 worker processes`,
  );
try {
  for (const workers of PHASES.includes('workers') ? SETUPS : []) {
    const result = await runWorkerSetup(workers, anvil.rpcUrl);
    drains.push(result);
    console.log(
      `  ${workers} worker process(es): ${result.perSecond} withdrawals confirmed/s (${result.seconds} s), ${result.transfers} transfers, correct ${result.correct ? 'yes' : `NO: ${result.problems.join('; ')}`}`,
    );
  }
} finally {
  await anvil.stop();
}
const json = {
  bench: 'scale-out',
  clients: CLIENTS,
  seconds: SECONDS,
  cpus: cpus().length,
  servers: results,
  workers: drains,
};
console.log(`BENCH_JSON ${JSON.stringify(json)}`);
await mkdir(RESULTS, { recursive: true });
await writeFile(`${RESULTS}scale-out.json`, `${JSON.stringify(json, null, 2)}\n`);
if (results.some((r) => !r.correct) || drains.some((r) => !r.correct)) process.exit(1);
