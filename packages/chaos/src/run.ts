/**
 * One chaos run: a fresh database, the real processes, simulated integrators and depositors, the
 * seeded fault schedule, a quiet phase, then the invariants. Everything the run starts it stops,
 * and the database it creates it drops, whatever happens.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createApiKey,
  createTenant,
  createWebhookEndpoint,
  openDatabase,
  recordDeposit,
  registerHotWallet,
  setRiskPolicy,
  withDatabase,
  withTenant,
} from '@idem/core';
import {
  type AnvilInstance,
  anvilDevPrivateKeys,
  createCustodianAdapter,
  type Ledger,
  startAnvil,
} from '@idem/rails';
import {
  type ActiveRule,
  type FaultProxy,
  initSoftHsmToken,
  type SimulatorProcess,
  spawnSimulator,
  startFaultProxy,
  tokenKey,
} from '@idem/rails/testing';
import { createIdemClient } from '@idem/sdk';
import {
  type BalanceRunReport,
  type CustodianAccountPass,
  RailRegistry,
  reconcileBalances,
} from '@idem/workers';
import pino from 'pino';
import postgres, { type Sql } from 'postgres';
import { createPublicClient, getAddress, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { scanChain } from './chain.ts';
import {
  btcTheCustodianHolds,
  DEPOSIT_FUNDER_KEY,
  type DepositLog,
  newDepositLog,
  runDepositors,
} from './deposits.ts';
import {
  type FailoverOutcome,
  type FailoverPlan,
  failoverChecks,
  type Probe,
  performFailover,
  startProbe,
} from './failover.ts';
import {
  type IntegratorLog,
  newIntegratorLog,
  resolveUnknown,
  runClient,
  runImpatientClient,
  sleep,
} from './integrators.ts';
import { type CheckResult, checkInvariants, type Landed, type TenantInfo } from './invariants.ts';
import { Prng } from './prng.ts';
import { type ManagedProcess, serverProcess, workerProcess } from './processes.ts';
import { type ChaosProxy, startChaosProxy } from './proxy.ts';
import { buildSchedule, describeEvent, type FaultEvent, type NodeMethods } from './schedule.ts';

export interface ChaosOptions {
  seed: number;
  /** The fault phase; the quiet phase follows. */
  durationMs: number;
  servers: number;
  workers: number;
  clients: number;
  /** The quiet phase ends at convergence or after this long, whichever is first. */
  quietMsMax?: number;
  /** A PostgreSQL server URL; the run creates (and drops) its own database on it. */
  databaseUrl: string;
  outDir?: string;
  /** Think time between a client's calls. */
  thinkMs?: [number, number];
  /**
   * Who holds the hot wallets' keys: anvil's development keys in process (default), or a SoftHSM2
   * token the run initialises, with the HSM's answers held past the deadline among the faults.
   */
  signer?: 'local' | 'pkcs11';
  /** Progress lines (to stderr in the CLI; silent in tests unless asked). */
  progress?: (line: string) => void;
  /**
   * A failover drill instead of the seeded fault schedule (issue 16): `databaseUrl` is the
   * formation's multi-host URL, and the plan's event happens 40% into the fault phase.
   */
  failover?: FailoverPlan;
}

export interface TimelineSample {
  tMs: number;
  phase: 'faults' | 'quiet';
  states: Record<string, number>;
}

export interface ChaosReport {
  seed: number;
  command: string;
  options: { durationMs: number; servers: number; workers: number; clients: number; quietMsMax: number };
  schedule: string[];
  faultsInjected: Record<string, number>;
  faultErrors: string[];
  /** Processes that died without being killed (crashes the faults provoked): findings, not faults. */
  unplannedExits: string[];
  processStarts: Record<string, number>;
  integrators: Record<string, number>;
  deposits: {
    chainSent: number;
    chainSendErrors: number;
    webhooksSent: number;
    webhooksAcknowledged: number;
    faults: Record<string, number>;
  };
  finalStates: Record<string, number>;
  throughput: {
    createdPerSecondDuringFaults: number;
    finalizedPerSecondDuringFaults: number;
    submitCallsDuringFaults: number;
  };
  convergedAfterMs: number | null;
  notConverged: string | null;
  landed: Landed;
  checks: CheckResult[];
  ok: boolean;
  firstViolation: string | null;
  outDir: string;
  timeline: TimelineSample[];
  wallClockMs: number;
  failover: FailoverOutcome | null;
}

const CHAIN_ID = 31337;
const ETH_CONFIRMATIONS = 2;
const TENANTS = 2;
/** Each client account's opening balances, in minor units. */
const OPENING_ETH = 50_000_000_000_000_000_000n;
const OPENING_BTC = 1_000_000_000n;
const repositoryRoot = fileURLToPath(new URL('../../../', import.meta.url));

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const began = Date.now();
  const say = options.progress ?? (() => {});
  const quietMsMax = options.quietMsMax ?? Math.max(60_000, options.durationMs);
  const prng = new Prng(options.seed);
  // A failover drill loses the primary and nothing else: its window and retries are its own.
  const schedule = options.failover
    ? []
    : buildSchedule(prng.fork('faults'), {
        faultPhaseMs: options.durationMs,
        servers: options.servers,
        workers: options.workers,
        signer: options.signer ?? 'local',
      });
  const seedLabel = `s${options.seed}`;
  const outDir = options.outDir ?? join(tmpdir(), 'idem-chaos', `seed-${options.seed}-${Date.now()}`);
  mkdirSync(outDir, { recursive: true });
  const cleanups: (() => Promise<unknown>)[] = [];
  const cleanup = async () => {
    for (const step of cleanups.reverse()) await step().catch(() => {});
  };

  try {
    // --- a fresh database ---
    const databaseName = `idem_chaos_${options.seed}_${randomBytes(3).toString('hex')}`;
    const admin = postgres(options.databaseUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database "${databaseName}"`);
    await admin.end();
    cleanups.push(async () => {
      const dropper = postgres(options.databaseUrl, { max: 1, onnotice: () => {} });
      try {
        await dropper.unsafe(`drop database if exists "${databaseName}" with (force)`);
      } finally {
        await dropper.end();
      }
    });
    const databaseUrl = withDatabase(options.databaseUrl, databaseName);
    say(`database ${databaseName}; logs in ${outDir}`);

    // --- the chain ---
    const anvil: AnvilInstance = await startAnvil({ chainId: CHAIN_ID, mining: { intervalSeconds: 1 } });
    cleanups.push(() => anvil.stop());
    const chain = createPublicClient({ transport: http(anvil.rpcUrl, { retryCount: 2 }) });

    // --- tenants, wallets, accounts, endpoint: set up once, before any fault ---
    const setupDb = await openDatabase({ url: databaseUrl, maxConnections: 2 });
    await setupDb.migrate();
    const tenants: TenantInfo[] = [];
    const apiKeys: string[] = [];
    const depositAddresses: { tenantIndex: number; address: string; accountRef: string }[] = [];
    const setupPrng = prng.fork('setup');
    // With --signer pkcs11, each hot wallet's key is generated in a SoftHSM2 token made for this run.
    const token = options.signer === 'pkcs11' ? initSoftHsmToken('idem-chaos') : null;
    if (token) cleanups.push(async () => token.dispose());
    const signerFaultFile = join(outDir, 'signer-fault.json');
    for (let index = 0; index < TENANTS; index += 1) {
      const { tenantId } = await createTenant(setupDb.db, {
        name: `Chaos Exchange ${index}`,
        assets: [
          { code: 'BTC', network: 'bitcoin', decimals: 8, confirmations: 3 },
          { code: 'ETH', network: 'ethereum', decimals: 18, confirmations: ETH_CONFIRMATIONS },
        ],
      });
      const key = token
        ? await tokenKey(token, `chaos-hot-wallet-${index}`)
        : {
            address: privateKeyToAccount(anvilDevPrivateKeys[index + 1] as Hex).address,
            keyRef: `dev:${index + 1}`,
          };
      const hotWallet = key.address;
      if (token) await rpc(anvil.rpcUrl, 'anvil_setBalance', [hotWallet, `0x${(10n ** 22n).toString(16)}`]);
      // Register with the chain's current nonce: the ledger allocates nonces from here on.
      const nextNonce = await chain.getTransactionCount({ address: hotWallet, blockTag: 'pending' });
      await withTenant(setupDb.db, tenantId, async (tx) => {
        await registerHotWallet(tx, {
          tenantId,
          network: 'ethereum',
          address: hotWallet,
          keyRef: key.keyRef,
          nextNonce,
        });
        for (const assetCode of ['ETH', 'BTC'])
          await setRiskPolicy(tx, {
            tenantId,
            assetCode,
            // Review would need staff approvals nobody gives here: everything in range is auto-approved.
            autoApproveMaxMinor: '1000000000000000000000000',
            fourEyesMinMinor: '10000000000000000000000000',
            velocityMaxPerHour: 1_000_000,
            similarWindowMinutes: 1,
            actor: 'chaos',
          });
      });
      apiKeys.push((await createApiKey(setupDb.db, tenantId, { label: 'chaos' })).apiKey);
      tenants.push({ index, tenantId, hotWallet, ethConfirmations: ETH_CONFIRMATIONS });
    }
    const custodianTenant = tenants[0] as TenantInfo;
    const endpoint = await createWebhookEndpoint(setupDb.db, custodianTenant.tenantId, {
      source: 'custodian',
    });
    const accounts: string[] = [];
    for (let c = 0; c < options.clients; c += 1) {
      const tenant = tenants[c % TENANTS] as TenantInfo;
      const accountRef = `acct-c${c}`;
      accounts.push(accountRef);
      await withTenant(setupDb.db, tenant.tenantId, async (tx) => {
        for (const [asset, amount] of [
          ['ETH', OPENING_ETH.toString()],
          ['BTC', OPENING_BTC.toString()],
        ] as const)
          await recordDeposit(tx, {
            tenantId: tenant.tenantId,
            deposit: {
              reference: `opening-${asset}-${accountRef}`,
              accountId: accountRef,
              asset,
              amountMinor: amount,
            },
            idempotencyKey: `opening-${asset}-${accountRef}`,
            actor: 'chaos-setup',
          });
      });
      const address = getAddress(`0x${setupPrng.hex(20)}`);
      depositAddresses.push({ tenantIndex: tenant.index, address, accountRef });
    }
    // Each hot wallet holds exactly what its tenant's ledger has in custody (anvil's development
    // accounts start with 10,000 ETH of nobody's money), so the balance-level comparison of
    // invariant 4 can hold to the wei.
    for (const tenant of tenants) {
      const clientsOfTenant = accounts.filter((_, c) => c % TENANTS === tenant.index).length;
      await rpc(anvil.rpcUrl, 'anvil_setBalance', [
        tenant.hotWallet,
        `0x${(OPENING_ETH * BigInt(clientsOfTenant)).toString(16)}`,
      ]);
    }
    await setupDb.close();

    const sql: Sql = postgres(databaseUrl, {
      max: 2,
      onnotice: () => {},
      connection: { application_name: 'idem-chaos' },
    });
    cleanups.push(() => sql.end({ timeout: 2 }));
    // No CLI or API registers deposit addresses yet: written as the owner, like the tenant setup above.
    for (const d of depositAddresses)
      await sql`insert into deposit_addresses (tenant_id, network, address, account_ref)
                values (${(tenants[d.tenantIndex] as TenantInfo).tenantId}, 'ethereum', ${d.address}, ${d.accountRef})`;

    // --- proxies, custodian, servers, workers ---
    const serverProxies: ChaosProxy[] = [];
    for (let s = 0; s < options.servers; s += 1) serverProxies.push(await startChaosProxy(null));
    const custodianProxy = await startChaosProxy(null);
    // The chain path: processes -> chainProxy (answers lost after forwarding) -> nodeFaults (a node
    // behind a load balancer: 429, no answer, a lagging view) -> anvil.
    const nodeFaults: FaultProxy = await startFaultProxy(anvil.rpcUrl);
    cleanups.push(() => nodeFaults.close());
    const chainProxy = await startChaosProxy(nodeFaults.url);
    for (const proxy of [...serverProxies, custodianProxy, chainProxy]) cleanups.push(() => proxy.close());
    const webhookUrl = () => `${(serverProxies[0] as ChaosProxy).url}/webhooks/${endpoint.endpointId}`;
    const simulator: SimulatorProcess = await spawnSimulator({
      webhookSecret: endpoint.secret,
      webhookUrl: webhookUrl(),
    });
    cleanups.push(() => simulator.stop());
    custodianProxy.setUpstream(simulator.url);
    await simulator.control({ settlement: { outcome: 'complete', afterMs: 1_500 } });
    // Every tenant shares the deployment's one (omnibus) custodian account: it holds their opening BTC.
    await simulator.control({
      fund: { asset: 'BTC', amountMinor: (OPENING_BTC * BigInt(accounts.length)).toString() },
    });

    const common = { DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn', NODE_ENV: 'test' };
    // Servers read the chain only for staff resolutions, but through the same faulty path as workers.
    const chainEnv = { IDEM_EVM_RPC_URL: chainProxy.url, IDEM_EVM_CHAIN_ID: String(CHAIN_ID) };
    const servers = serverProxies.map((_, s) =>
      serverProcess(`server-${s}`, { ...common, ...chainEnv, IDEM_DB_POOL_MAX: '4' }, outDir),
    );
    const workerEnv = {
      ...common,
      IDEM_DB_POOL_MAX: '3',
      ...chainEnv,
      IDEM_CUSTODIAN_URL: custodianProxy.url,
      IDEM_WORKER_INTERVAL_MS: '300',
      // Short leases, so a killed worker's claims are taken over within the run.
      IDEM_WORKER_LEASE_MS: '4000',
      // A pass that hangs is named in the worker's log well inside the quiet phase.
      IDEM_WORKER_STALL_ALERT_MS: '15000',
      // Short, so an UNKNOWN nobody can resolve gets its named owner inside the quiet phase.
      IDEM_UNKNOWN_ESCALATE_AFTER_MS: '5000',
      // Two chain passes prove a withdrawal not sent; short, so both fit in the run.
      IDEM_NOT_SENT_CONFIRM_INTERVAL_MS: '1000',
      // Stuck transactions (evicted by a fee spike, dropped) are bumped within the run.
      IDEM_BUMP_AFTER_MS: 'ethereum=2000',
      ...(token
        ? { ...token.env, IDEM_SIGN_TIMEOUT_MS: '1000', IDEM_SIGNER_FAULT_FILE: signerFaultFile }
        : {}),
    };
    const workers = Array.from({ length: options.workers }, (_, w) =>
      workerProcess(`worker-${w}`, workerEnv, outDir),
    );
    for (const proc of [...servers, ...workers]) cleanups.push(() => proc.stop());
    await Promise.all([
      ...servers.map(async (server, s) => {
        await server.start();
        (serverProxies[s] as ChaosProxy).setUpstream(server.url);
      }),
      ...workers.map((worker) => worker.start()),
    ]);
    say(`started ${servers.length} servers, ${workers.length} workers, anvil, custodian simulator`);

    // --- the fault phase ---
    const startedAt = Date.now();
    const stopAt = startedAt + options.durationMs;
    const faultsInjected: Record<string, number> = {};
    const faultErrors: string[] = [];
    const restarts: Promise<void>[] = [];
    const timers: NodeJS.Timeout[] = [];
    const count = (name: string) => {
      faultsInjected[name] = (faultsInjected[name] ?? 0) + 1;
    };
    const faultPrng = prng.fork('fault-targets');
    // One restart at a time per process: a kill during a restart, or a crash right after a kill,
    // must not start two copies that fight over one name.
    const restarting = new Set<string>();
    const restart = (proc: ManagedProcess, afterMs: number, onUp: () => void) => {
      if (restarting.has(proc.name)) return;
      restarting.add(proc.name);
      restarts.push(
        (async () => {
          await sleep(afterMs);
          for (let attempt = 1; attempt <= 5 && !proc.ready; attempt += 1) {
            try {
              if (proc.running) proc.kill();
              await sleep(100);
              await proc.start();
              onUp();
            } catch (error) {
              faultErrors.push(`restart of ${proc.name} failed: ${(error as Error).message}`);
              await sleep(1_000);
            }
          }
          restarting.delete(proc.name);
        })(),
      );
    };
    // A process that dies on its own is a finding: counted, reported, and restarted like a supervisor would.
    const unplannedExits: string[] = [];
    const supervising = true;
    for (const [s, server] of servers.entries())
      server.onUnplannedExit((detail) => {
        unplannedExits.push(`${server.name} ${detail} at t+${((Date.now() - startedAt) / 1000).toFixed(1)}s`);
        (serverProxies[s] as ChaosProxy).setUpstream(null);
        if (supervising) restart(server, 500, () => (serverProxies[s] as ChaosProxy).setUpstream(server.url));
      });
    for (const worker of workers)
      worker.onUnplannedExit((detail) => {
        unplannedExits.push(`${worker.name} ${detail} at t+${((Date.now() - startedAt) / 1000).toFixed(1)}s`);
        if (supervising) restart(worker, 500, () => {});
      });
    const hotWallets = new Set(tenants.map((t) => t.hotWallet.toLowerCase()));
    const nodeRules: { label: string; rule: ActiveRule }[] = [];
    const lagCoin = prng.fork('node-lag');
    /** The base fee before the first spike: where fees return at the end of the fault phase. */
    let baseFeeBeforeSpikes: bigint | null = null;
    const pendingHotWalletHashes = async (): Promise<string[]> => {
      const pool = (await rpc(anvil.rpcUrl, 'txpool_content', [])) as {
        pending?: Record<string, Record<string, { hash: string }>>;
      };
      return Object.entries(pool.pending ?? {})
        .filter(([from]) => hotWallets.has(from.toLowerCase()))
        .flatMap(([, byNonce]) => Object.values(byNonce).map((tx) => tx.hash));
    };
    const inject = async (event: FaultEvent): Promise<void> => {
      switch (event.kind) {
        case 'kill-server': {
          const server = servers[event.target] as ManagedProcess;
          const proxy = serverProxies[event.target] as ChaosProxy;
          if (!server.ready || restarting.has(server.name)) return count('kill-server (skipped: not up)');
          proxy.setUpstream(null);
          server.kill();
          count('kill-server');
          restart(server, event.restartAfterMs, () => proxy.setUpstream(server.url));
          return;
        }
        case 'kill-worker': {
          const worker = workers[event.target] as ManagedProcess;
          if (!worker.ready || restarting.has(worker.name)) return count('kill-worker (skipped: not up)');
          worker.kill();
          count('kill-worker');
          restart(worker, event.restartAfterMs, () => {});
          return;
        }
        case 'proxy': {
          const proxy =
            event.site === 'server'
              ? serverProxies[event.target]
              : event.site === 'custodian'
                ? custodianProxy
                : chainProxy;
          proxy?.inject({ mode: event.mode, times: event.times, delayMs: event.delayMs, match: event.match });
          count(`proxy-queued ${event.site} ${event.mode}`);
          return;
        }
        case 'pg-terminate': {
          // Aim at work in progress: wait briefly for a backend inside a statement or a transaction.
          for (let tries = 0; tries < 30; tries += 1) {
            const rows = await sql<{ terminated: number }[]>`
              select count(*) filter (where pg_terminate_backend(pid))::int as terminated
              from pg_stat_activity
              where datname = ${databaseName} and pid <> pg_backend_pid()
                and application_name <> 'idem-chaos'
                and state in ('active', 'idle in transaction', 'idle in transaction (aborted)')`;
            const terminated = rows[0]?.terminated ?? 0;
            if (terminated > 0) {
              count('pg-terminate');
              faultsInjected['pg-terminate connections'] =
                (faultsInjected['pg-terminate connections'] ?? 0) + terminated;
              return;
            }
            await sleep(50);
          }
          return count('pg-terminate (skipped: nothing in flight)');
        }
        case 'custodian-submit':
          await simulator.control({ fault: event.fault, faultTimes: event.times });
          count(`custodian ${event.fault}`);
          return;
        case 'webhook-delivery':
          await simulator.control({ webhooks: { delivery: event.delivery, lateMs: 3_000 } });
          count(`custodian webhooks ${event.delivery}`);
          timers.push(
            setTimeout(
              () => void simulator.control({ webhooks: { delivery: 'normal' } }).catch(() => {}),
              event.forMs,
            ),
          );
          return;
        case 'settlement-fail':
          await simulator.control({ settlement: { outcome: 'fail', afterMs: 1_500 } });
          count('custodian settlement fail');
          timers.push(
            setTimeout(
              () =>
                void simulator
                  .control({ settlement: { outcome: 'complete', afterMs: 1_500 } })
                  .catch(() => {}),
              event.forMs,
            ),
          );
          return;
        case 'anvil-reorg': {
          const head = Number(await chain.getBlockNumber());
          if (head <= event.depth + 1) return count('anvil-reorg (skipped: chain too short)');
          await rpc(anvil.rpcUrl, 'anvil_reorg', [event.depth, []]);
          count(`anvil-reorg depth ${event.depth}`);
          return;
        }
        case 'anvil-drop': {
          // A hot wallet's transaction sits in the pool for under a block interval: look for one briefly.
          for (let tries = 0; tries < 25; tries += 1) {
            const candidates = await pendingHotWalletHashes();
            if (candidates.length > 0) {
              await rpc(anvil.rpcUrl, 'anvil_dropTransaction', [faultPrng.pick(candidates)]);
              return count('anvil-drop');
            }
            await sleep(80);
          }
          return count('anvil-drop (skipped: nothing pending)');
        }
        case 'node': {
          const methods = NODE_METHODS[event.methods];
          if (event.mode === 'lag') {
            const head = Number(await chain.getBlockNumber());
            const until = Date.now() + event.forMs;
            // Some calls reach the lagging node, others a current one, as behind a load balancer.
            const rule = nodeFaults.addRule({
              methods,
              mode: 'lag',
              lagHeight: Math.max(0, head - event.lagBlocks),
              when: () => Date.now() < until && lagCoin.int(1, 100) <= event.sharePercent,
            });
            nodeRules.push({ label: 'node lag', rule });
          } else {
            const rule = nodeFaults.addRule({ methods, mode: event.mode, times: event.times });
            nodeRules.push({ label: `node ${event.mode}`, rule });
          }
          count(`node ${event.mode}`);
          return;
        }
        case 'signer-timeout': {
          writeFileSync(
            signerFaultFile,
            JSON.stringify({ holdUntil: Date.now() + event.forMs, holdMs: event.holdMs }),
          );
          count('signer-timeout');
          return;
        }
        case 'fee-spike': {
          const latest = await chain.getBlock();
          const current = latest.baseFeePerGas ?? 0n;
          if (baseFeeBeforeSpikes === null || current < baseFeeBeforeSpikes) baseFeeBeforeSpikes = current;
          const pending = await pendingHotWalletHashes();
          const spike = BigInt(event.baseFeeGwei) * 10n ** 9n;
          // Held for a few blocks (set again before each), then it decays by 1/8 per block on its own.
          for (let block = 0; block < event.holdBlocks; block += 1) {
            await rpc(anvil.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${spike.toString(16)}`]);
            await sleep(1_000);
          }
          count('fee-spike');
          // anvil evicts what the new base fee makes unminable instead of keeping it pooled as geth
          // does: those are dropped transactions whose stored bytes cannot be mined until fees fall.
          const stillPooled = new Set(await pendingHotWalletHashes());
          let evicted = 0;
          for (const hash of pending) {
            if (stillPooled.has(hash)) continue;
            const receipt = await chain.getTransactionReceipt({ hash: hash as Hex }).catch(() => null);
            if (!receipt) evicted += 1;
          }
          if (evicted > 0)
            faultsInjected['fee-spike evicted pending'] =
              (faultsInjected['fee-spike evicted pending'] ?? 0) + evicted;
          return;
        }
      }
    };
    for (const event of schedule)
      timers.push(
        setTimeout(() => {
          inject(event).catch((error: unknown) =>
            faultErrors.push(`${describeEvent(event)}: ${(error as Error).message}`),
          );
        }, event.atMs),
      );

    // --- the failover drill (instead of the schedule) ---
    let probe: Probe | null = null;
    let failoverEvent: Promise<
      Omit<
        FailoverOutcome,
        | 'writeUnavailableMs'
        | 'probe'
        | 'clientRetries'
        | 'unknownRetried'
        | 'unknownResolved'
        | 'unknownNotOne'
      >
    > | null = null;
    if (options.failover) {
      const plan = options.failover;
      const started = startProbe(databaseUrl);
      probe = started;
      cleanups.push(() => started.close());
      const atMs = Math.round(options.durationMs * 0.4);
      failoverEvent = sleep(atMs)
        .then(() => performFailover(plan, say))
        .then(
          ({ formerPrimary, promoted, promotedAfterMs }) => ({
            scenario: plan.scenario,
            atMs,
            formerPrimary: formerPrimary.name,
            promoted: promoted.name,
            promotedAfterMs,
            error: null,
          }),
          (error: unknown) => ({
            scenario: plan.scenario,
            atMs,
            formerPrimary: '?',
            promoted: null,
            promotedAfterMs: null,
            error: `failover ${plan.scenario}: ${(error as Error).message}`,
          }),
        );
    }

    const timeline: TimelineSample[] = [];
    let phase: TimelineSample['phase'] = 'faults';
    const sampler = setInterval(() => {
      const tMs = Date.now() - startedAt;
      sql<
        { state: string; n: number }[]
      >`select state, count(*)::int as n from operations where kind = 'withdrawal' group by state`
        .then((rows) =>
          timeline.push({ tMs, phase, states: Object.fromEntries(rows.map((r) => [r.state, r.n])) }),
        )
        .catch(() => {});
    }, 1_000);
    cleanups.push(async () => clearInterval(sampler));

    const integrators: IntegratorLog = newIntegratorLog();
    const deposits: DepositLog = newDepositLog();
    const clientRuns = Array.from({ length: options.clients }, (_, c) => {
      const tenantIndex = c % TENANTS;
      return runClient(
        {
          index: c,
          tenantIndex,
          accountId: accounts[c] as string,
          client: createIdemClient({
            baseUrl: (serverProxies[c % options.servers] as ChaosProxy).url,
            apiKey: apiKeys[tenantIndex] as string,
            requestTimeoutMs: 4_000,
            retry: { attemptsMax: 3, totalMsMax: 10_000 },
          }),
          assets: tenantIndex === custodianTenant.index ? ['ETH', 'BTC'] : ['ETH'],
          prng: prng.fork(`client-${c}`),
          startedAt,
          stopAt,
          thinkMsMin: options.thinkMs?.[0] ?? 150,
          thinkMsMax: options.thinkMs?.[1] ?? 900,
          seedLabel,
        },
        integrators,
      );
    });
    // I16-F4: from the failover event until the formation settled, one more integrator with a
    // deadline shorter than the outage gives up on what it cannot learn, and retries it afterwards.
    const failoverEnd = failoverEvent;
    const impatientRun = failoverEnd
      ? sleep(Math.round(options.durationMs * 0.4)).then(() =>
          runImpatientClient(
            {
              index: options.clients,
              tenantIndex: 0,
              accountId: accounts[0] as string,
              client: createIdemClient({
                baseUrl: (serverProxies[0] as ChaosProxy).url,
                apiKey: apiKeys[0] as string,
                requestTimeoutMs: 4_000,
                retry: { attemptsMax: 3, totalMsMax: 10_000 },
              }),
              assets: ['ETH'],
              prng: prng.fork('impatient-client'),
              startedAt,
              stopAt,
              thinkMsMin: 150,
              thinkMsMax: 350,
              seedLabel,
            },
            createIdemClient({
              baseUrl: (serverProxies[0] as ChaosProxy).url,
              apiKey: apiKeys[0] as string,
              // Shorter than any outage the drill causes, even on a quiet machine where the pool
              // reconnects within a second: a submission caught in it is given up, not waited out
              // (a 1.5 s deadline gave up on nothing in a quiet switchover; the F4 test then failed).
              requestTimeoutMs: 250,
              retry: { attemptsMax: 1 },
            }),
            integrators,
            failoverEnd,
          ),
        )
      : Promise.resolve();
    const depositRun = runDepositors(
      {
        prng: prng.fork('deposits'),
        stopAt,
        seedLabel,
        anvilRpcUrl: anvil.rpcUrl,
        addresses: depositAddresses,
        webhook: {
          url: () =>
            `${(serverProxies[faultPrng.int(0, options.servers - 1)] as ChaosProxy).url}/webhooks/${endpoint.endpointId}`,
          secret: endpoint.secret,
          accounts: depositAddresses
            .filter((d) => d.tenantIndex === custodianTenant.index)
            .map((d) => d.accountRef),
        },
      },
      deposits,
    );
    await sleep(options.durationMs);
    const createdDuringFaults = integrators.createdAtMs.length;
    const submitCallsDuringFaults = integrators.counts.submit_calls ?? 0;
    const finalizedDuringFaults = finalCount(timeline.at(-1)?.states ?? {});
    say(
      `fault phase over: ${createdDuringFaults} withdrawals created, ${Object.values(faultsInjected).reduce((a, b) => a + b, 0)} faults`,
    );
    await Promise.all([...clientRuns, impatientRun, depositRun]);
    for (const timer of timers) clearTimeout(timer);

    // --- the quiet phase ---
    phase = 'quiet';
    const quietStarted = Date.now();
    await Promise.all(restarts);
    for (const proxy of [...serverProxies, custodianProxy, chainProxy]) proxy.clearFaults();
    nodeFaults.clearRules();
    // Fees return to where they were before the first spike (or lower, if they decayed below it):
    // under every maximum fee signed so far, so the quiet phase can converge without a bump.
    if (baseFeeBeforeSpikes !== null) {
      const now = (await chain.getBlock()).baseFeePerGas ?? 0n;
      const calm = now < baseFeeBeforeSpikes ? now : baseFeeBeforeSpikes;
      await rpc(anvil.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${calm.toString(16)}`]);
    }
    await simulator.control({
      fault: 'none',
      webhooks: { delivery: 'normal' },
      settlement: { outcome: 'complete', afterMs: 1_500 },
    });
    for (const [s, server] of servers.entries())
      if (!server.ready) {
        if (server.running) server.kill();
        await sleep(100);
        await server.start();
        (serverProxies[s] as ChaosProxy).setUpstream(server.url);
      }
    for (const worker of workers)
      if (!worker.ready) {
        if (worker.running) worker.kill();
        await sleep(100);
        await worker.start();
      }
    // What the clients gave up on during the failover, they now ask again with the same key.
    const failoverEnded = failoverEvent ? await failoverEvent : null;
    const unknownRetries = options.failover
      ? await resolveUnknown(integrators)
      : { retried: 0, resolved: 0, resolvedKeys: [] };
    // Each given-up submission, once resolved, must be exactly one operation in the database.
    const unknownNotOne =
      unknownRetries.resolvedKeys.length === 0
        ? []
        : (
            await sql<{ key: string; n: number }[]>`
              select k.key, (select count(*)::int from operations o where o.idempotency_key = k.key) as n
              from unnest(${unknownRetries.resolvedKeys}::text[]) as k(key)`
          )
            .filter((row) => row.n !== 1)
            .map((row) => `key ${row.key}: ${row.n} operations`);
    const landed = detectLanded();
    let convergedAfterMs: number | null = null;
    let outstanding = '';
    while (Date.now() - quietStarted < quietMsMax) {
      const [row] = await sql<{ stuck: number; received: number }[]>`
        select (select count(*) from operations where kind = 'withdrawal'
                and not (state in ('CONFIRMED', 'REJECTED', 'VERIFIED_NOT_SENT')
                         or (state in ('UNKNOWN', 'FAILED_TERMINAL') and owner is not null)))::int as stuck,
               (select count(*) from inbox_events where status = 'RECEIVED')::int as received`;
      const settled = row?.stuck === 0 && (!landed.inboxProcessing || row.received === 0);
      outstanding = `${row?.stuck ?? '?'} withdrawals not final, ${row?.received ?? '?'} inbox events unprocessed`;
      // Deposits need the chain to move past their depth: give it a few blocks after the faults.
      if (settled && Date.now() - quietStarted > (ETH_CONFIRMATIONS + 4) * 1_000) {
        convergedAfterMs = Date.now() - quietStarted;
        break;
      }
      await sleep(1_000);
    }
    clearInterval(sampler);
    // The evidence describes one moment: workers that have not converged would otherwise keep
    // signing, storing and sending while the ledger, the chain and the node's log are read one
    // after the other (I18-SENT). A clean stop lets a pass finish its commits and sends.
    await Promise.all(workers.map((worker) => worker.stop()));
    say(
      convergedAfterMs === null
        ? `did not converge within ${quietMsMax} ms`
        : `converged ${convergedAfterMs} ms into the quiet phase`,
    );

    // --- the evidence ---
    const chainView = await scanChain(
      chain,
      hotWallets,
      privateKeyToAccount(DEPOSIT_FUNDER_KEY as Hex).address,
    );
    // The custodian also holds the BTC deposits it notified us of (the webhooks our intake
    // acknowledged; a deposit whose notification never got through is the missed-event recovery's
    // concern). Then the real balance-level reconciliation, the code the workers run, for every
    // tenant: invariant 4 holds when every place's figure is observed and fully explained.
    const storedDepositEvents = new Set(
      (
        await sql<{ event_id: string }[]>`
          select event_id from inbox_events where event_type = 'deposit.confirmed'`
      ).map((row) => row.event_id),
    );
    const heldBtc = btcTheCustodianHolds(deposits.webhooks, storedDepositEvents);
    if (heldBtc > 0n) await simulator.control({ fund: { asset: 'BTC', amountMinor: heldBtc.toString() } });
    const balanceRuns = await balanceReconciliation(databaseUrl, anvil.rpcUrl, simulator.url, tenants);
    const custodianLedger: Ledger = await simulator.ledger();
    const checks = await checkInvariants({
      balanceRuns,
      sql,
      tenants,
      custodianTenantId: custodianTenant.tenantId,
      chain: chainView,
      custodian: custodianLedger,
      integrators,
      deposits,
      landed,
      broadcast: nodeFaults.rawTransactions,
      broadcastAt: nodeFaults.rawTransactionsAt,
    });
    // An unstored transaction is traced further in what the workers logged about the withdrawals
    // stored for its nonce (a signer that did not answer, a send, a lease taken over).
    const unstored = checks.find((check) => check.id === 'sent-only-persisted' && check.status === 'fail');
    if (unstored) unstored.violations.push(...workerLinesAbout(outDir, unstored.violations));
    // Withdrawals nobody moved: what each worker said last comes first (a stalled pass, a stage failing).
    const unconverged = checks.find((check) => check.id === 'converge' && check.status === 'fail');
    if (unconverged) unconverged.violations.unshift(...workerLogTails(outDir, 4));
    const finalRows = await sql<{ state: string; n: number }[]>`
      select state, count(*)::int as n from operations where kind = 'withdrawal' group by state order by state`;
    let failover: FailoverOutcome | null = null;
    if (failoverEnded && probe) {
      await probe.stop();
      const lost = await probe.lost();
      const summary = probe.summary();
      failover = {
        ...failoverEnded,
        writeUnavailableMs: probe.windowMs,
        probe: { ...summary, lost: lost.length },
        clientRetries: Object.entries(integrators.counts)
          .filter(([name]) => name === 'transport_errors' || name.startsWith('api_'))
          .reduce((sum, [, n]) => sum + n, 0),
        unknownRetried: unknownRetries.retried,
        unknownResolved: unknownRetries.resolved,
        unknownNotOne,
      };
      checks.push(...failoverChecks(failover, unplannedExits));
    }
    const failed = checks.find((check) => check.status === 'fail');
    const faultSeconds = options.durationMs / 1_000;
    const report: ChaosReport = {
      seed: options.seed,
      command: `pnpm chaos --seed ${options.seed} --duration ${Math.round(options.durationMs / 1000)}s --servers ${options.servers} --workers ${options.workers} --clients ${options.clients}${options.signer === 'pkcs11' ? ' --signer pkcs11' : ''}${options.failover ? ` --failover ${options.failover.scenario}` : ''}`,
      options: {
        durationMs: options.durationMs,
        servers: options.servers,
        workers: options.workers,
        clients: options.clients,
        quietMsMax,
      },
      schedule: schedule.map(describeEvent),
      faultsInjected: {
        ...faultsInjected,
        ...proxyHits(serverProxies, custodianProxy, chainProxy),
        ...nodeRuleHits(nodeRules),
        ...(token ? { 'signer-timeout calls hit': signerTimeoutsLogged(outDir) } : {}),
      },
      faultErrors,
      unplannedExits,
      processStarts: Object.fromEntries([...servers, ...workers].map((p) => [p.name, p.starts])),
      integrators: { ...integrators.counts },
      deposits: {
        chainSent: deposits.chain.length,
        chainSendErrors: deposits.chainSendErrors,
        webhooksSent: deposits.webhooks.length,
        webhooksAcknowledged: deposits.webhooks.filter((w) => w.acknowledged).length,
        faults: deposits.faults,
      },
      finalStates: Object.fromEntries(finalRows.map((row) => [row.state, row.n])),
      throughput: {
        createdPerSecondDuringFaults: round(createdDuringFaults / faultSeconds),
        finalizedPerSecondDuringFaults: round(finalizedDuringFaults / faultSeconds),
        submitCallsDuringFaults,
      },
      convergedAfterMs,
      notConverged: convergedAfterMs === null ? outstanding : null,
      landed,
      checks,
      ok: failed === undefined,
      firstViolation: failed
        ? `${failed.id} ${failed.title}: ${failed.violations[0] ?? '(no detail)'}`
        : null,
      outDir,
      timeline,
      wallClockMs: 0,
      failover,
    };
    report.wallClockMs = Date.now() - began;
    return report;
  } finally {
    await cleanup();
  }
}

function finalCount(states: Record<string, number>): number {
  return (states.CONFIRMED ?? 0) + (states.REJECTED ?? 0) + (states.VERIFIED_NOT_SENT ?? 0);
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}

function proxyHits(servers: ChaosProxy[], custodian: ChaosProxy, chain: ChaosProxy): Record<string, number> {
  const out: Record<string, number> = {};
  const add = (site: string, proxy: ChaosProxy) => {
    for (const [mode, n] of Object.entries(proxy.hits))
      if (n > 0) out[`proxy-hit ${site} ${mode}`] = (out[`proxy-hit ${site} ${mode}`] ?? 0) + n;
    if (proxy.upstreamDown > 0)
      out[`proxy ${site} upstream down (502)`] =
        (out[`proxy ${site} upstream down (502)`] ?? 0) + proxy.upstreamDown;
  };
  for (const proxy of servers) add('server', proxy);
  add('custodian', custodian);
  add('chain', chain);
  return out;
}

/** The JSON-RPC methods each node fault may hit. */
const NODE_READS = [
  'eth_blockNumber',
  'eth_getBlockByNumber',
  'eth_getBlockByHash',
  'eth_getTransactionReceipt',
  'eth_getTransactionByHash',
  'eth_getTransactionCount',
  'eth_getLogs',
  'eth_getBalance',
  'eth_call',
  'eth_feeHistory',
  'eth_maxPriorityFeePerGas',
  'eth_gasPrice',
  'eth_estimateGas',
];
const NODE_METHODS: Record<NodeMethods, readonly string[]> = {
  reads: NODE_READS,
  send: ['eth_sendRawTransaction'],
  any: [...NODE_READS, 'eth_sendRawTransaction', 'eth_chainId'],
};

/** How many calls each node fault actually changed: a rule nobody's call matched proves nothing. */
function nodeRuleHits(rules: { label: string; rule: ActiveRule }[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const { label, rule } of rules)
    if (rule.hits > 0) out[`${label} calls hit`] = (out[`${label} calls hit`] ?? 0) + rule.hits;
  return out;
}

/**
 * Which parts of the system this tree has, read from the workers' source: a check that needs a
 * missing part is reported "not yet checkable" instead of passing over nothing.
 */
export function detectLanded(): Landed {
  const sources = readSources(join(repositoryRoot, 'packages/workers/src'));
  const all = sources.map((s) => s.text).join('\n');
  return {
    depositWatcher: all.includes('scanDeposits('),
    inboxProcessing: all.includes('processInbox('),
    reconciliation: sources.some((s) => !s.path.endsWith('inbox.ts') && s.text.includes('openBreak(')),
  };
}

function readSources(dir: string): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...readSources(path));
    else if (name.endsWith('.ts')) out.push({ path, text: readFileSync(path, 'utf8') });
  }
  return out;
}

/** The worker log lines that name an operation id found in `texts`, oldest first, at most 20. */
export function workerLinesAbout(outDir: string, texts: readonly string[]): string[] {
  const ids = new Set(
    texts.flatMap(
      (text) => text.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g) ?? [],
    ),
  );
  if (ids.size === 0) return [];
  const lines: { time: string; line: string }[] = [];
  for (const name of readdirSync(outDir).filter((n) => n.startsWith('worker-') && n.endsWith('.log'))) {
    for (const raw of readFileSync(join(outDir, name), 'utf8').split('\n')) {
      const id = [...ids].find((candidate) => raw.includes(candidate));
      if (!id) continue;
      const time = /"time":"([^"]+)"/.exec(raw)?.[1] ?? '';
      const msg = /"msg":"([^"]+)"/.exec(raw)?.[1] ?? raw.slice(0, 120);
      lines.push({ time, line: `worker log ${name}: ${time} ${msg} (operation ${id})` });
    }
  }
  return lines
    .sort((a, b) => a.time.localeCompare(b.time))
    .slice(0, 20)
    .map((entry) => entry.line);
}

/** The last `count` lines of each worker's log (the newest start of it), shortened. */
export function workerLogTails(outDir: string, count: number): string[] {
  return readdirSync(outDir)
    .filter((name) => name.startsWith('worker-') && name.endsWith('.log'))
    .sort()
    .flatMap((name) => {
      const lines = readFileSync(join(outDir, name), 'utf8')
        .split('\n')
        .filter((line) => line.trim() !== '');
      return lines.slice(-count).map((line) => `worker log ${name}: ${line.slice(0, 300)}`);
    });
}

/** How many signer calls the workers gave up on at their deadline (their warn lines, issue 18). */
function signerTimeoutsLogged(outDir: string): number {
  return readdirSync(outDir)
    .filter((name) => name.startsWith('worker-') && name.endsWith('.log'))
    .map((name) => readFileSync(join(outDir, name), 'utf8').split('the signer did not answer').length - 1)
    .reduce((a, b) => a + b, 0);
}

async function rpc(url: string, method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(5_000),
  });
  const body = (await response.json()) as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}

/** Balance-level reconciliation of every tenant, straight to the node and the custodian (no fault proxy). */
async function balanceReconciliation(
  databaseUrl: string,
  rpcUrl: string,
  custodianUrl: string,
  tenants: TenantInfo[],
): Promise<BalanceRunReport[]> {
  const database = await openDatabase({ url: databaseUrl, maxConnections: 2 });
  try {
    const ctx = {
      db: database.db,
      rails: new RailRegistry({
        evm: { rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 5_000 },
        custodian: createCustodianAdapter({ baseUrl: custodianUrl, timeoutMs: 5_000 }),
      }),
      log: pino({ level: 'silent' }),
    };
    const accountPasses = new Map<string, Promise<CustodianAccountPass>>();
    const runs: BalanceRunReport[] = [];
    for (const tenant of tenants)
      runs.push(
        await reconcileBalances(ctx, tenant.tenantId, {
          ranBy: 'chaos:invariant-4',
          trigger: 'on_demand',
          accountPasses,
        }),
      );
    return runs;
  } finally {
    await database.close();
  }
}
