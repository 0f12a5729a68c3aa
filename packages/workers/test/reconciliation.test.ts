import { randomUUID } from 'node:crypto';
import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  getBalances,
  getOperation,
  listBreaks,
  transition,
  withTenant,
} from '@idem/core';
import { createCustodianAdapter, generateWebhookSecret } from '@idem/rails';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { WorkerContext } from '../src/context.ts';
import { reconcileTenant } from '../src/reconciliation.ts';
import { CHAIN_ID, type Environment, ETH, reconcilerContext, startEnvironment } from './environment.ts';

const BTC_DESTINATION = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';

let env: Environment;
let simulator: SimulatorProcess;
let ctx: WorkerContext;

beforeAll(async () => {
  env = await startEnvironment();
  simulator = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
  await simulator.control({ settlement: { outcome: 'complete', afterMs: 20 } });
  ctx = reconcilerContext(
    env.t.db,
    {
      evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID },
      custodian: createCustodianAdapter({ baseUrl: simulator.url }),
    },
    pino({ level: 'silent' }),
  );
});
afterAll(async () => {
  await simulator.stop();
  await env.close();
});

const worker = () => env.worker({ rails: ctx.rails.config });

/** Worker passes, a block mined after each, until every one of the operations is CONFIRMED. */
async function settleAll(...operationIds: string[]): Promise<void> {
  const w = worker();
  await vi.waitFor(
    async () => {
      await w.runOnce();
      await env.mine(1);
      for (const operationId of operationIds) {
        expect((await env.operation(operationId)).state, operationId).toBe('CONFIRMED');
      }
    },
    { timeout: 20_000, interval: 60 },
  );
}

async function allBalances() {
  return withTenant(env.t.db, env.tenantId, async (tx) => [
    await getBalances(tx, env.tenantId, 'acct-1'),
    await getBalances(tx, env.tenantId, 'acct-dep'),
  ]);
}

async function openBreaks() {
  return withTenant(env.t.db, env.tenantId, (tx) =>
    listBreaks(tx, { tenantId: env.tenantId, status: 'open' }),
  );
}

describe('three-way reconciliation', () => {
  it('C21 ledger, custodian and chain in agreement: no break', async () => {
    const eth = await env.withdraw(ETH / 100n);
    const btc = await env.withdraw(21_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    await settleAll(eth.operationId, btc.operationId);
    expect((await env.operation(eth.operationId)).state).toBe('CONFIRMED');
    expect((await env.operation(btc.operationId)).state).toBe('CONFIRMED');
    const report = await reconcileTenant(ctx, env.tenantId);
    expect(report.findings).toEqual([]);
    expect(report.checkedOperations).toBeGreaterThanOrEqual(2);
  });

  it("C21 on a custodian account shared with another tenant, that tenant's transfers are not unknown", async () => {
    const { tenantId: other } = await createTenant(env.t.db, { name: 'Neighbour' });
    await creditAsOperator(env.t.db, {
      tenantId: other,
      deposit: { reference: 'n-fund', accountId: 'n-acct', asset: 'BTC', amountMinor: '100000' },
      idempotencyKey: 'n-fund',
      actor: 'test',
    });
    const neighbourOp = await withTenant(env.t.db, other, async (tx) => {
      const created = await createWithdrawal(tx, {
        tenantId: other,
        request: {
          withdrawalId: 'n-1',
          accountId: 'n-acct',
          asset: 'BTC',
          destination: BTC_DESTINATION,
          amountMinor: '500',
        },
        idempotencyKey: 'withdrawal-n-1',
      });
      return created.operation;
    });
    await ctx.rails.custodian().submit({
      externalReference: neighbourOp.operationId,
      asset: 'BTC',
      amountMinor: '500',
      destination: BTC_DESTINATION,
    });
    const report = await reconcileTenant(ctx, env.tenantId);
    expect(report.findings.filter((f) => f.subject.startsWith('custodian-transfer:'))).toEqual([]);
  });

  it('C21 injected variances appear as open breaks with class and owner; balances are untouched', async () => {
    // 1. A transfer at the custodian that no withdrawal of ours made.
    const stranger = randomUUID();
    await ctx.rails.custodian().submit({
      externalReference: stranger,
      asset: 'BTC',
      amountMinor: '999',
      destination: BTC_DESTINATION,
    });
    // 2. A custodian withdrawal still pending at the custodian, which a faulty path marked CONFIRMED.
    await simulator.control({ settlement: { outcome: 'hold', afterMs: 0 } });
    const failed = await env.withdraw(22_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    await worker().runOnce();
    await withTenant(env.t.db, env.tenantId, async (tx) => {
      const op = await getOperation(tx, env.tenantId, failed.operationId);
      if (op.state === 'BROADCAST')
        await transition(tx, op, 'CONFIRMED', { actor: 'faulty-path', reason: 'injected' });
    });
    await simulator.control({ settlement: { outcome: 'complete', afterMs: 20 } });
    // 3. An on-chain withdrawal whose hold a faulty path released although it was sent.
    const sent = await env.withdraw(ETH / 200n);
    await worker().runOnce();
    await withTenant(env.t.db, env.tenantId, async (tx) => {
      const broadcast = await getOperation(tx, env.tenantId, sent.operationId);
      const unknown = await transition(tx, broadcast, 'UNKNOWN', {
        actor: 'faulty-path',
        reason: 'injected',
      });
      await transition(tx, unknown, 'VERIFIED_NOT_SENT', { actor: 'faulty-path', reason: 'injected' });
    });

    const before = await allBalances();
    const report = await reconcileTenant(ctx, env.tenantId);
    expect(await allBalances()).toEqual(before);

    const breaks = await openBreaks();
    const bySubject = new Map(breaks.map((b) => [b.subject, b]));
    const strangerBreak = [...bySubject.values()].find(
      (b) => b.subject.startsWith('custodian-transfer:') && b.observedAmountMinor === '999',
    );
    expect(strangerBreak?.breakClass).toBe('unknown_operation');
    expect(strangerBreak?.owner).toBe('ops-reconciliation');
    expect(bySubject.get(`operation:${failed.operationId}`)?.breakClass).toBe('genuine_variance');
    expect(bySubject.get(`operation:${sent.operationId}`)?.breakClass).toBe('genuine_variance');
    expect(bySubject.get(`operation:${sent.operationId}`)?.owner).toBe('finance-controller');
    expect(report.breaksOpened).toBeGreaterThanOrEqual(3);

    // Running again finds the same differences and opens nothing new.
    expect((await reconcileTenant(ctx, env.tenantId)).breaksOpened).toBe(0);
  });
});
