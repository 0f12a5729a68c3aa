/**
 * The evidence at the end of a run: the chain scanned, the custodian's ledger, the workers' own
 * balance-level reconciliation, every invariant checked against them, and the workers' logs read
 * for what a failed check needs explained.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openDatabase } from '@idem/core';
import { createCustodianAdapter, type Ledger } from '@idem/rails';
import {
  type BalanceRunReport,
  type CustodianAccountPass,
  RailRegistry,
  reconcileBalances,
} from '@idem/workers';
import pino from 'pino';
import type { Sql } from 'postgres';
import type { createPublicClient, Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { scanChain } from './chain.ts';
import { btcTheCustodianHolds, DEPOSIT_FUNDER_KEY, type DepositLog } from './deposits.ts';
import { nothingSignedWhileFrozen } from './freeze-check.ts';
import type { FreezeWindow } from './freeze-fault.ts';
import type { IntegratorLog } from './integrators.ts';
import { type CheckResult, checkInvariants, type Landed, type TenantInfo } from './invariants.ts';
import { CHAIN_ID, type RunWorld } from './setup.ts';
import type { RunSystem } from './system.ts';

const repositoryRoot = fileURLToPath(new URL('../../../', import.meta.url));

/** Every invariant, checked once the system has been given its quiet phase. */
export async function checkTheRun(input: {
  sql: Sql;
  databaseUrl: string;
  anvilRpcUrl: string;
  chain: ReturnType<typeof createPublicClient>;
  hotWallets: Set<string>;
  world: RunWorld;
  system: RunSystem;
  integrators: IntegratorLog;
  deposits: DepositLog;
  landed: Landed;
  outDir: string;
  /** The freezes the run made (freeze-fault.ts); judged only when the schedule had one. */
  freezes: readonly FreezeWindow[];
  freezeScheduled: boolean;
}): Promise<CheckResult[]> {
  const { sql, world, system, deposits } = input;
  const chainView = await scanChain(
    input.chain,
    input.hotWallets,
    privateKeyToAccount(DEPOSIT_FUNDER_KEY as Hex).address,
  );
  // The custodian also holds every BTC deposit it received, notified or not (the poller finds
  // those no notification brought). Then the real balance-level reconciliation, the code the
  // workers run, for every tenant: invariant 4 holds when every place's figure is observed and
  // fully explained.
  const heldBtc = btcTheCustodianHolds(deposits.webhooks);
  if (heldBtc > 0n)
    await system.simulator.control({ fund: { asset: 'BTC', amountMinor: heldBtc.toString() } });
  const balanceRuns = await balanceReconciliation(
    input.databaseUrl,
    input.anvilRpcUrl,
    system.simulator.url,
    world.tenants,
  );
  const custodianLedger: Ledger = await system.simulator.ledger();
  const checks = await checkInvariants({
    balanceRuns,
    sql,
    tenants: world.tenants,
    custodianTenantId: world.custodianTenant.tenantId,
    chain: chainView,
    custodian: custodianLedger,
    integrators: input.integrators,
    deposits,
    landed: input.landed,
    broadcast: system.nodeFaults.rawTransactions,
    broadcastAt: system.nodeFaults.rawTransactionsAt,
  });
  // A scheduled freeze that was never made leaves the check not checkable, which fails the run.
  if (input.freezeScheduled)
    checks.push(await nothingSignedWhileFrozen(sql, input.freezes, system.signerLog ?? undefined));
  // An unstored transaction is traced further in what the workers logged about the withdrawals
  // stored for its nonce (a signer that did not answer, a send, a lease taken over).
  const unstored = checks.find((check) => check.id === 'sent-only-persisted' && check.status === 'fail');
  if (unstored) unstored.violations.push(...workerLinesAbout(input.outDir, unstored.violations));
  // Withdrawals nobody moved: what each worker said last comes first (a stalled pass, a stage failing).
  const unconverged = checks.find((check) => check.id === 'converge' && check.status === 'fail');
  if (unconverged) unconverged.violations.unshift(...workerLogTails(input.outDir, 4));
  return checks;
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

/** How many signer calls the workers gave up on at their deadline (their warn lines). */
export function signerTimeoutsLogged(outDir: string): number {
  return readdirSync(outDir)
    .filter((name) => name.startsWith('worker-') && name.endsWith('.log'))
    .map((name) => readFileSync(join(outDir, name), 'utf8').split('the signer did not answer').length - 1)
    .reduce((a, b) => a + b, 0);
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
