/**
 * One chaos run: a fresh database, the real processes, simulated integrators and depositors, the
 * seeded fault schedule, a quiet phase, then the invariants. Everything the run starts it stops,
 * and the database it creates it drops, whatever happens. Each phase lives in its own file:
 * setup.ts, system.ts, faults.ts (and failover-drill.ts), load.ts, quiet-phase.ts, evidence.ts.
 */
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AnvilInstance, startAnvil } from '@idem/rails';
import { verifySignerLog } from '@idem/server/signer-log';
import type { ActiveRule } from '@idem/testing/chain';
import { initSoftHsmToken } from '@idem/testing/signer';
import postgres, { type Sql } from 'postgres';
import { createPublicClient, type Hex, http, keccak256, recoverTransactionAddress } from 'viem';
import { type DepositLog, newDepositLog } from './deposits.ts';
import { checkTheRun, detectLanded, signerTimeoutsLogged } from './evidence.ts';
import type { FailoverOutcome, FailoverPlan } from './failover.ts';
import {
  type FailoverDrill,
  finishFailoverDrill,
  retryUnknown,
  startFailoverDrill,
  type UnknownRetries,
} from './failover-drill.ts';
import { FaultInjector } from './faults.ts';
import { FreezeDrill } from './freeze-fault.ts';
import { type IntegratorLog, newIntegratorLog, sleep } from './integrators.ts';
import type { CheckResult, Landed, TenantInfo } from './invariants.ts';
import { runLoad } from './load.ts';
import { Prng } from './prng.ts';
import type { ChaosProxy } from './proxy.ts';
import { waitForConvergence } from './quiet-phase.ts';
import { buildSchedule, describeEvent, type FaultEvent } from './schedule.ts';
import {
  CHAIN_ID,
  type Cleanups,
  createRunDatabase,
  type RunWorld,
  type SoftHsmToken,
  setUpWorld,
} from './setup.ts';
import { type RunSystem, startSystem } from './system.ts';
import { sampleTimeline, type TimelineSample } from './timeline.ts';

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
  /** Where hot-wallet keys live: in process, in SoftHSM2 opened by the workers, or behind the signer service. */
  signer?: 'local' | 'pkcs11' | 'service';
  /** Progress lines (to stderr in the CLI; silent in tests unless asked). */
  progress?: (line: string) => void;
  /**
   * A failover drill instead of the seeded fault schedule: `databaseUrl` is the
   * formation's multi-host URL, and the plan's event happens 40% into the fault phase.
   */
  failover?: FailoverPlan;
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
  /**
   * `--signer service`: the service's log chain verified, what it signed and refused, and any
   * hot-wallet transaction that reached the node without a signature in that log (should be none).
   */
  signerService?: { logVerified: boolean; signed: number; refused: number; sentNotInLog: string[] };
}

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
  const outDir = options.outDir ?? join(tmpdir(), 'idem-chaos', `seed-${options.seed}-${Date.now()}`);
  mkdirSync(outDir, { recursive: true });
  const cleanups: Cleanups = [];
  try {
    const run = await setUpRun(options, prng, outDir, cleanups, say);
    const phase = await runFaultPhase(run, options, schedule, prng, cleanups, say);
    const quiet = await runQuietPhase(run, phase, quietMsMax, options, say);
    const checks = await checkTheRun({
      sql: run.sql,
      databaseUrl: run.databaseUrl,
      anvilRpcUrl: run.anvil.rpcUrl,
      chain: run.chain,
      hotWallets: run.hotWallets,
      world: run.world,
      system: run.system,
      integrators: phase.integrators,
      deposits: phase.deposits,
      landed: quiet.landed,
      outDir,
      freezes: run.freezes.windows,
      freezeScheduled: schedule.some((event) => event.kind === 'freeze'),
    });
    const failover =
      quiet.failoverEnded && phase.drill
        ? await finishFailoverDrill({
            drill: phase.drill,
            ended: quiet.failoverEnded,
            retries: quiet.unknownRetries,
            integrators: phase.integrators,
            unplannedExits: phase.injector.unplannedExits,
            checks,
          })
        : null;
    // The monitor's events and the nodes' logs explain a failover; the formation deletes them on stop.
    if (options.failover) await options.failover.formation.collectLogs(join(outDir, 'formation'));
    const report = await buildReport({
      options,
      quietMsMax,
      schedule,
      outDir,
      run,
      phase,
      quiet,
      checks,
      failover,
    });
    report.wallClockMs = Date.now() - began;
    return report;
  } finally {
    for (const step of cleanups.reverse()) await step().catch(() => {});
  }
}

/** What the run set up: its database, the chain, the tenants, and the running system. */
interface RunSetup {
  databaseName: string;
  databaseUrl: string;
  anvil: AnvilInstance;
  chain: ReturnType<typeof createPublicClient>;
  world: RunWorld;
  system: RunSystem;
  /** The run's own connection (not the system's): the fault injector's and the checks' reads. */
  sql: Sql;
  hotWallets: Set<string>;
  token: SoftHsmToken | null;
  signerFaultFile: string;
  /** The freeze fault's hand, and the windows the freeze check judges. */
  freezes: FreezeDrill;
}

async function setUpRun(
  options: ChaosOptions,
  prng: Prng,
  outDir: string,
  cleanups: Cleanups,
  say: (line: string) => void,
): Promise<RunSetup> {
  const { databaseName, databaseUrl } = await createRunDatabase(options.databaseUrl, options.seed, cleanups);
  say(`database ${databaseName}; logs in ${outDir}`);
  const anvil: AnvilInstance = await startAnvil({ chainId: CHAIN_ID, mining: { intervalSeconds: 1 } });
  cleanups.push(() => anvil.stop());
  const chain = createPublicClient({ transport: http(anvil.rpcUrl, { retryCount: 2 }) });
  const token = initToken(options, cleanups);
  const signerFaultFile = join(outDir, 'signer-fault.json');
  const world = await setUpWorld({
    databaseUrl,
    anvilRpcUrl: anvil.rpcUrl,
    chain,
    clients: options.clients,
    prng: prng.fork('setup'),
    token,
  });
  const sql: Sql = postgres(databaseUrl, {
    max: 2,
    onnotice: () => {},
    connection: { application_name: 'idem-chaos' },
  });
  cleanups.push(() => sql.end({ timeout: 2 }));
  // No CLI or API registers deposit addresses yet: written as the owner, like the tenant setup.
  for (const d of world.depositAddresses)
    await sql`insert into deposit_addresses (tenant_id, network, address, account_ref)
              values (${(world.tenants[d.tenantIndex] as TenantInfo).tenantId}, 'ethereum', ${d.address}, ${d.accountRef})`;
  for (const d of world.custodianDepositAddresses)
    await sql`insert into deposit_addresses (tenant_id, network, address, account_ref)
              values (${world.custodianTenant.tenantId}, 'bitcoin', ${d.address}, ${d.accountRef})`;
  const system = await startSystem({
    anvil,
    world,
    databaseUrl,
    servers: options.servers,
    workers: options.workers,
    outDir,
    token,
    signerFaultFile,
    signerService: options.signer === 'service',
    cleanups,
  });
  say(
    `started ${system.servers.length} servers, ${system.workers.length} workers, anvil, custodian simulator`,
  );
  const hotWallets = new Set(world.tenants.map((t) => t.hotWallet.toLowerCase()));
  const freezes = new FreezeDrill(sql, databaseUrl, world);
  cleanups.push(() => freezes.close());
  return {
    databaseName,
    databaseUrl,
    anvil,
    chain,
    world,
    system,
    sql,
    hotWallets,
    token,
    signerFaultFile,
    freezes,
  };
}

/** With --signer pkcs11 or service, each hot wallet's key is generated in a SoftHSM2 token made for this run. */
function initToken(options: ChaosOptions, cleanups: Cleanups): SoftHsmToken | null {
  const token =
    options.signer === 'pkcs11' || options.signer === 'service' ? initSoftHsmToken('idem-chaos') : null;
  if (token) cleanups.push(async () => token.dispose());
  return token;
}

interface FaultPhase {
  injector: FaultInjector;
  drill: FailoverDrill | null;
  timeline: ReturnType<typeof sampleTimeline>;
  integrators: IntegratorLog;
  deposits: DepositLog;
  startedAt: number;
  createdDuringFaults: number;
  submitCallsDuringFaults: number;
  finalizedDuringFaults: number;
}

/** The load runs for the fault phase while the schedule (or the failover drill) strikes. */
async function runFaultPhase(
  run: RunSetup,
  options: ChaosOptions,
  schedule: FaultEvent[],
  prng: Prng,
  cleanups: Cleanups,
  say: (line: string) => void,
): Promise<FaultPhase> {
  const startedAt = Date.now();
  const stopAt = startedAt + options.durationMs;
  const targets = prng.fork('fault-targets');
  const injector: FaultInjector = new FaultInjector(run.system, {
    sql: run.sql,
    databaseName: run.databaseName,
    anvil: run.anvil,
    chain: run.chain,
    hotWallets: run.hotWallets,
    signerFaultFile: run.signerFaultFile,
    targets,
    lagCoin: prng.fork('node-lag'),
    freezes: run.freezes,
  });
  injector.superviseUnplannedExits(startedAt);
  injector.schedule(schedule);
  const drill = options.failover
    ? startFailoverDrill({
        plan: options.failover,
        databaseUrl: run.databaseUrl,
        durationMs: options.durationMs,
        say,
        cleanups,
      })
    : null;
  const timeline = sampleTimeline(run.sql, startedAt, cleanups);
  const integrators: IntegratorLog = newIntegratorLog();
  const deposits: DepositLog = newDepositLog();
  const load = runLoad(
    {
      world: run.world,
      system: run.system,
      prng,
      targets,
      anvilRpcUrl: run.anvil.rpcUrl,
      clients: options.clients,
      servers: options.servers,
      durationMs: options.durationMs,
      thinkMs: options.thinkMs,
      startedAt,
      stopAt,
      seedLabel: `s${options.seed}`,
      failoverEnd: drill?.event ?? null,
    },
    integrators,
    deposits,
  );
  await sleep(options.durationMs);
  const createdDuringFaults = integrators.createdAtMs.length;
  const submitCallsDuringFaults = integrators.counts.submit_calls ?? 0;
  const finalizedDuringFaults = finalCount(timeline.samples.at(-1)?.states ?? {});
  say(
    `fault phase over: ${createdDuringFaults} withdrawals created, ${Object.values(injector.faultsInjected).reduce((a, b) => a + b, 0)} faults`,
  );
  await load;
  injector.clearTimers();
  return {
    injector,
    drill,
    timeline,
    integrators,
    deposits,
    startedAt,
    createdDuringFaults,
    submitCallsDuringFaults,
    finalizedDuringFaults,
  };
}

interface QuietPhase {
  failoverEnded: Awaited<FailoverDrill['event']> | null;
  unknownRetries: UnknownRetries;
  landed: Landed;
  convergedAfterMs: number | null;
  outstanding: string;
}

/** Every fault taken back; the system is given until `quietMsMax` to converge, then the workers stop. */
async function runQuietPhase(
  run: RunSetup,
  phase: FaultPhase,
  quietMsMax: number,
  options: ChaosOptions,
  say: (line: string) => void,
): Promise<QuietPhase> {
  phase.timeline.quiet();
  const quietStarted = Date.now();
  await phase.injector.takeFaultsBack();
  // What the clients gave up on during the failover, they now ask again with the same key.
  const failoverEnded = phase.drill ? await phase.drill.event : null;
  const unknownRetries = options.failover
    ? await retryUnknown(run.sql, phase.integrators)
    : { retried: 0, resolved: 0, notOne: [] };
  const landed = detectLanded();
  const { convergedAfterMs, outstanding } = await waitForConvergence(
    run.sql,
    landed,
    quietStarted,
    quietMsMax,
  );
  phase.timeline.stop();
  // The evidence describes one moment: workers that have not converged would otherwise keep
  // signing, storing and sending while the ledger, the chain and the node's log are read one
  // after the other (I18-SENT). A clean stop lets a pass finish its commits and sends.
  await Promise.all(run.system.workers.map((worker) => worker.stop()));
  say(
    convergedAfterMs === null
      ? `did not converge within ${quietMsMax} ms`
      : `converged ${convergedAfterMs} ms into the quiet phase`,
  );
  return { failoverEnded, unknownRetries, landed, convergedAfterMs, outstanding };
}

async function buildReport(input: {
  options: ChaosOptions;
  quietMsMax: number;
  schedule: FaultEvent[];
  outDir: string;
  run: RunSetup;
  phase: FaultPhase;
  quiet: QuietPhase;
  checks: CheckResult[];
  failover: FailoverOutcome | null;
}): Promise<ChaosReport> {
  const { options, run, phase, quiet, checks } = input;
  const { system } = run;
  const { injector } = phase;
  const finalRows = await run.sql<{ state: string; n: number }[]>`
    select state, count(*)::int as n from operations where kind = 'withdrawal' group by state order by state`;
  const failed = checks.find((check) => check.status === 'fail');
  const faultSeconds = options.durationMs / 1_000;
  const { integrators, deposits } = phase;
  return {
    seed: options.seed,
    command: commandOf(options),
    options: {
      durationMs: options.durationMs,
      servers: options.servers,
      workers: options.workers,
      clients: options.clients,
      quietMsMax: input.quietMsMax,
    },
    schedule: input.schedule.map(describeEvent),
    faultsInjected: {
      ...injector.faultsInjected,
      ...proxyHits(system.serverProxies, system.custodianProxy, system.chainProxy),
      ...nodeRuleHits(injector.nodeRules),
      ...(run.token ? { 'signer-timeout calls hit': signerTimeoutsLogged(input.outDir) } : {}),
    },
    faultErrors: [...injector.faultErrors, ...run.freezes.errors],
    unplannedExits: injector.unplannedExits,
    ...(system.signerLog
      ? {
          signerService: await signerServiceEvidence(
            system.signerLog,
            system.nodeFaults.rawTransactions,
            run.hotWallets,
          ),
        }
      : {}),
    processStarts: Object.fromEntries(
      [...system.servers, ...system.workers, ...(system.signer ? [system.signer] : [])].map((p) => [
        p.name,
        p.starts,
      ]),
    ),
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
      createdPerSecondDuringFaults: round(phase.createdDuringFaults / faultSeconds),
      finalizedPerSecondDuringFaults: round(phase.finalizedDuringFaults / faultSeconds),
      submitCallsDuringFaults: phase.submitCallsDuringFaults,
    },
    convergedAfterMs: quiet.convergedAfterMs,
    notConverged: quiet.convergedAfterMs === null ? quiet.outstanding : null,
    landed: quiet.landed,
    checks,
    ok: failed === undefined,
    firstViolation: failed ? `${failed.id} ${failed.title}: ${failed.violations[0] ?? '(no detail)'}` : null,
    outDir: input.outDir,
    timeline: phase.timeline.samples,
    wallClockMs: 0,
    failover: input.failover,
  };
}

/** The command that replays this run. */
function commandOf(options: ChaosOptions): string {
  return `pnpm chaos --seed ${options.seed} --duration ${Math.round(options.durationMs / 1000)}s --servers ${options.servers} --workers ${options.workers} --clients ${options.clients}${options.signer && options.signer !== 'local' ? ` --signer ${options.signer}` : ''}${options.failover ? ` --failover ${options.failover.scenario}` : ''}`;
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

/** How many calls each node fault actually changed: a rule nobody's call matched proves nothing. */
function nodeRuleHits(rules: { label: string; rule: ActiveRule }[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const { label, rule } of rules)
    if (rule.hits > 0) out[`${label} calls hit`] = (out[`${label} calls hit`] ?? 0) + rule.hits;
  return out;
}

/** The signer service's log against what reached the node: every hot-wallet transaction sent was signed there. */
async function signerServiceEvidence(
  logPath: string,
  broadcast: readonly string[],
  hotWallets: Set<string>,
): Promise<NonNullable<ChaosReport['signerService']>> {
  const verified = verifySignerLog(logPath);
  const lines = verified.ok ? verified.lines : [];
  const signed = new Set(lines.filter((l) => l.outcome === 'signed').map((l) => l.txHash?.toLowerCase()));
  const sentNotInLog: string[] = [];
  for (const raw of new Set(broadcast.map((r) => r.toLowerCase()))) {
    const sender = await recoverTransactionAddress({ serializedTransaction: raw as never });
    if (!hotWallets.has(sender.toLowerCase())) continue;
    const hash = keccak256(raw as Hex);
    if (!signed.has(hash)) sentNotInLog.push(hash);
  }
  return {
    logVerified: verified.ok,
    signed: lines.filter((l) => l.outcome === 'signed').length,
    refused: lines.filter((l) => l.outcome === 'refused').length,
    sentNotInLog,
  };
}
