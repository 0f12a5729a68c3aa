/**
 * End-to-end benchmark of the money movers: withdrawals from submission to CONFIRMED on a real anvil
 * chain and a real PostgreSQL, with 1, 2 and 4 workers; then the time from an injected timeout
 * (the node's answer lost after it received the transaction) to a reconciled outcome.
 * Prints a table and one `BENCH_JSON` line; writes bench-results/workers.json.
 */

import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import {
  createTenant,
  createWithdrawal,
  getOperation,
  recordDeposit,
  registerHotWallet,
  rowsOf,
  setRiskPolicy,
  withTenant,
  withTenantAsConnection,
} from '@idem/core';
import { anvilDevPrivateKeys, startAnvil } from '@idem/rails';
import { ETH, startFaultProxy } from '@idem/testing/chain';
import { createTestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { createPublicClient, getAddress, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { RailRegistry } from '../src/rails.ts';
import { createWorker } from '../src/worker.ts';

const WITHDRAWALS = Number(process.env.BENCH_WITHDRAWALS ?? 120);
const TENANTS = 4;

process.env.TEST_DATABASE_URL ??= process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const anvil = await startAnvil({ chainId: 31337, mining: 'auto', accounts: 10 });
const chain = createPublicClient({ transport: http(anvil.rpcUrl) });
const t = await createTestDatabase({ maxConnections: 12 });
const log = pino({ level: 'silent' });

async function provision(walletIndex: number): Promise<string> {
  const { tenantId } = await createTenant(t.db, {
    name: `Bench ${walletIndex}`,
    assets: [{ code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 1 }],
  });
  const address = privateKeyToAccount(anvilDevPrivateKeys[walletIndex] as Hex).address;
  // As the deployment's own tools (the tables' owner): the application's role may add no hot
  // wallet, set no rule that auto-approves, credit nothing without its evidence.
  await withTenantAsConnection(t.db, tenantId, async (tx) => {
    await registerHotWallet(tx, {
      tenantId,
      network: 'ethereum',
      address,
      keyRef: `dev:${walletIndex}`,
      nextNonce: await chain.getTransactionCount({ address, blockTag: 'pending' }),
    });
    await setRiskPolicy(tx, {
      tenantId,
      assetCode: 'ETH',
      autoApproveMaxMinor: (10n * ETH).toString(),
      fourEyesMinMinor: (100n * ETH).toString(),
      // A benchmark account withdraws far more often than the default velocity rule allows.
      velocityMaxPerHour: 1_000_000,
      actor: 'bench',
    });
    await recordDeposit(tx, {
      tenantId,
      deposit: {
        reference: 'bench-funding',
        accountId: 'acct',
        asset: 'ETH',
        amountMinor: (1000n * ETH).toString(),
      },
      idempotencyKey: 'bench-funding',
      actor: 'bench',
    });
  });
  return tenantId;
}

const tenants: string[] = [];
for (let i = 0; i < TENANTS; i++) tenants.push(await provision(i + 1));

async function submitBatch(count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const tenantId = tenants[i % tenants.length] as string;
    const withdrawalId = `b-${randomBytes(6).toString('hex')}`;
    const created = await withTenant(t.db, tenantId, (tx) =>
      createWithdrawal(tx, {
        tenantId,
        request: {
          withdrawalId,
          accountId: 'acct',
          asset: 'ETH',
          destination: getAddress(`0x${randomBytes(20).toString('hex')}`),
          amountMinor: String(1_000_000 + i),
        },
        idempotencyKey: `withdrawal-${withdrawalId}`,
      }),
    );
    ids.push(created.operation.operationId);
  }
  return ids;
}

async function confirmedCount(): Promise<number> {
  const rows = rowsOf<{ n: number }>(
    await t.db.execute(
      sql`select count(*)::int as n from operations where kind = 'withdrawal' and state = 'CONFIRMED'`,
    ),
  );
  return rows[0]?.n ?? 0;
}

interface Phase {
  name: string;
  workers: number;
  withdrawals: number;
  seconds: number;
  perSecond: number;
}

async function runPhase(workerCount: number): Promise<Phase> {
  const before = await confirmedCount();
  await submitBatch(WITHDRAWALS);
  const rails = new RailRegistry({ evm: { rpcUrl: anvil.rpcUrl, chainId: 31337 } });
  const workers = Array.from({ length: workerCount }, (_, i) =>
    createWorker({ db: t.db, rails, log, workerId: `bench-${workerCount}-${i}`, batchSize: 50 }),
  );
  const started = performance.now();
  const deadline = started + 300_000;
  let done = false;
  await Promise.all(
    workers.map(async (worker) => {
      while (!done && performance.now() < deadline) {
        const report = await worker.runOnce();
        if (process.env.BENCH_DEBUG) console.log(JSON.stringify(report));
        if ((await confirmedCount()) - before >= WITHDRAWALS) done = true;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const confirmed = (await confirmedCount()) - before;
  if (confirmed < WITHDRAWALS) throw new Error(`only ${confirmed} of ${WITHDRAWALS} confirmed`);
  return {
    name: 'submit to CONFIRMED',
    workers: workerCount,
    withdrawals: WITHDRAWALS,
    seconds,
    perSecond: WITHDRAWALS / seconds,
  };
}

async function timeoutToReconciled(): Promise<number> {
  const proxy = await startFaultProxy(anvil.rpcUrl);
  try {
    const [operationId] = await submitBatch(1);
    const tenantId = tenants[0] as string;
    const rails = new RailRegistry({ evm: { rpcUrl: proxy.url, chainId: 31337, requestTimeoutMs: 2_000 } });
    // Only the send's answer is lost: the worker asks the node's chain id and the fees before it
    // signs, and with those refused too the pass would stop there and leave the withdrawal APPROVED.
    proxy.spareMethods = ['eth_chainId', 'eth_feeHistory'];
    const worker = createWorker({ db: t.db, rails, log, workerId: 'bench-timeout' });
    proxy.fault = 'forward-then-502';
    await worker.runOnce();
    proxy.fault = 'none';
    const op = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, operationId as string));
    if (op.state !== 'UNKNOWN') throw new Error(`expected UNKNOWN after the dropped answer, got ${op.state}`);
    const started = performance.now();
    for (;;) {
      await worker.runOnce();
      const current = await withTenant(t.db, tenantId, (tx) =>
        getOperation(tx, tenantId, operationId as string),
      );
      if (current.state === 'CONFIRMED') break;
      if (performance.now() - started > 60_000) throw new Error('not reconciled within 60 s');
    }
    return performance.now() - started;
  } finally {
    await proxy.close();
  }
}

try {
  const phases: Phase[] = [];
  for (const count of [1, 2, 4]) phases.push(await runPhase(count));
  const reconcileMs = await timeoutToReconciled();
  console.log(
    `idem workers bench: ${WITHDRAWALS} withdrawals per phase over ${TENANTS} tenants (one hot wallet each), anvil auto-mining, depth 1`,
  );
  console.log('phase                 workers  withdrawals  seconds  per second');
  for (const phase of phases) {
    console.log(
      `${phase.name.padEnd(21)} ${String(phase.workers).padStart(7)}  ${String(phase.withdrawals).padStart(11)}  ${phase.seconds.toFixed(2).padStart(7)}  ${phase.perSecond.toFixed(1).padStart(10)}`,
    );
  }
  console.log(
    `injected timeout to reconciled outcome: ${reconcileMs.toFixed(0)} ms (worker passes back to back)`,
  );
  const json = {
    withdrawalsPerPhase: WITHDRAWALS,
    tenants: TENANTS,
    phases,
    timeoutToReconciledMs: Math.round(reconcileMs),
  };
  console.log(`BENCH_JSON ${JSON.stringify(json)}`);
  const dir = new URL('../../../bench-results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  writeFileSync(new URL('workers.json', dir), `${JSON.stringify(json, null, 2)}\n`);
} finally {
  await t.dispose();
  await anvil.stop();
}
