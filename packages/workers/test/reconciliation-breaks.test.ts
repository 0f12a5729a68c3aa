import { randomUUID } from 'node:crypto';
import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  listBreaks,
  type ReconciliationBreak,
  recordInboxEvent,
  rowsOf,
  withTenant,
} from '@idem/core';
import { type CustodianTransfer, createCustodianAdapter, generateWebhookSecret } from '@idem/rails';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerContext } from '../src/context.ts';
import { reconcileTenant } from '../src/reconciliation.ts';
import { processInbox } from '../src/steps/inbox.ts';
import {
  completedAtCustodian,
  type Environment,
  reconcilerContext,
  startEnvironment,
  testClock,
} from './environment.ts';

/**
 * Breaks that cannot hide (C21), against a real database, a real anvil and the
 * custodian simulator in its own process. BTC here has a reconciliation window of 8 seconds, so a
 * timing break that outlives it escalates within the test.
 */
const BTC_DESTINATION = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
const ELSEWHERE = 'bc1qxy2kgdygjrsqtzq2n0yrf2493p83kkfjhx0wlh';
// Minutes: a loaded machine's first reconciliation always sees the items young; the test ages
// them past the window by moving the reconciler's clock.
const BTC_WINDOW_SECONDS = 600;
const clock = testClock();

let env: Environment;
let simulator: SimulatorProcess;
let ctx: WorkerContext;
const logLines: string[] = [];

beforeAll(async () => {
  env = await startEnvironment({ reconciliationWindowSeconds: { BTC: BTC_WINDOW_SECONDS } });
  simulator = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
  ctx = contextFor(simulator);
});
afterAll(async () => {
  await simulator?.stop();
  await env?.close();
});

function contextFor(custodian: SimulatorProcess): WorkerContext {
  return {
    ...reconcilerContext(
      env.t.db,
      { custodian: createCustodianAdapter({ baseUrl: custodian.url }) },
      pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) }),
    ),
    now: clock.now,
  };
}

const worker = () => env.worker({ rails: ctx.rails.config });
const btc = (amount: bigint) => env.withdraw(amount, { asset: 'BTC', destination: BTC_DESTINATION });

async function breaksOf(tenantId: string, subject: string): Promise<ReconciliationBreak[]> {
  const all = await withTenant(env.t.db, tenantId, (tx) => listBreaks(tx, { tenantId, limit: 500 }));
  return all.filter((b) => b.subject === subject);
}

function transfer(overrides: Partial<CustodianTransfer> & { externalReference: string }): CustodianTransfer {
  const now = new Date().toISOString();
  return {
    id: `trf_${randomUUID()}`,
    asset: 'BTC',
    amountMinor: '1000',
    destination: BTC_DESTINATION,
    status: 'completed',
    createdAt: now,
    updatedAt: now,
    ...overrides,
  };
}

describe('I13-BRK breaks that cannot hide', () => {
  it('I13-BRK C21 a timing break closes itself when the item arrives, and another escalates past the asset window', async () => {
    // The custodian completes both transfers but sends no webhook: the ledger lags behind it.
    await simulator.control({ settlement: { outcome: 'complete', afterMs: 1_500 } });
    const arrives = await btc(31_000n);
    const stays = await btc(32_000n);
    await worker().runOnce();
    expect((await env.operation(arrives.operationId)).state).toBe('BROADCAST');
    expect((await env.operation(stays.operationId)).state).toBe('BROADCAST');
    await completedAtCustodian(simulator.url, arrives.operationId, stays.operationId);

    const first = await reconcileTenant(ctx, env.tenantId);
    const [arrivesTiming] = await breaksOf(env.tenantId, `operation:${arrives.operationId}`);
    const [staysTiming] = await breaksOf(env.tenantId, `operation:${stays.operationId}`);
    expect(arrivesTiming).toMatchObject({ breakClass: 'timing', status: 'open' });
    expect(staysTiming).toMatchObject({ breakClass: 'timing', status: 'open' });
    expect(first.breaksOpened).toBeGreaterThanOrEqual(2);

    // The item arrives for one: the custodian's completion webhook reaches the inbox.
    const providerRef = (await env.operation(arrives.operationId)).providerRef ?? '';
    await withTenant(env.t.db, env.tenantId, (tx) =>
      recordInboxEvent(tx, {
        tenantId: env.tenantId,
        endpointId: 'we-test',
        source: 'custodian',
        eventId: `evt-${providerRef}`,
        rawBody: JSON.stringify({
          type: 'transfer.completed',
          data: transfer({
            id: providerRef,
            externalReference: arrives.operationId,
            amountMinor: '31000',
          }),
        }),
      }),
    );
    await processInbox(ctx, env.tenantId);
    expect((await env.operation(arrives.operationId)).state).toBe('CONFIRMED');

    await reconcileTenant(ctx, env.tenantId);
    const [closed] = await breaksOf(env.tenantId, `operation:${arrives.operationId}`);
    expect(closed).toMatchObject({ breakClass: 'timing', status: 'closed', closedAs: 'arrived' });
    expect(closed?.closureEvidence).toMatchObject({
      operationState: 'CONFIRMED',
      transferStatus: 'completed',
    });
    expect((await breaksOf(env.tenantId, `operation:${stays.operationId}`))[0]?.status).toBe('open');

    // The other never arrives: past the asset's window it escalates to a genuine variance.
    clock.advance(BTC_WINDOW_SECONDS * 1_000 + 1_000);
    logLines.length = 0;
    const escalation = await reconcileTenant(ctx, env.tenantId);
    expect(escalation.breaksOpened).toBe(1);
    const history = await breaksOf(env.tenantId, `operation:${stays.operationId}`);
    const old = history.find((b) => b.breakId === staysTiming?.breakId);
    const successor = history.find((b) => b.breakId !== staysTiming?.breakId);
    expect(old).toMatchObject({ breakClass: 'timing', status: 'closed', closedAs: 'escalated' });
    expect(old?.closureEvidence).toMatchObject({ escalatedTo: successor?.breakId });
    expect(successor).toMatchObject({
      breakClass: 'genuine_variance',
      status: 'open',
      escalatedFrom: staysTiming?.breakId,
      owner: 'finance-controller',
    });
    const alerts = logLines.map((line) => JSON.parse(line)).filter((line) => line.alert === true);
    expect(alerts.map((line) => line.subject)).toContain(`operation:${stays.operationId}`);

    // Nothing new on the next run: the variance stays open for a person.
    expect((await reconcileTenant(ctx, env.tenantId)).breaksOpened).toBe(0);
  });

  it('I13-BRK C21 a custodian completion to a different address is a break, not a settlement', async () => {
    await simulator.control({ settlement: { outcome: 'hold', afterMs: 0 } });
    const elsewhere = await btc(41_000n);
    const otherMemo = await btc(42_000n);
    // The custodian's books carry our references with other terms than the approved payloads.
    await simulator.seed([
      transfer({ externalReference: elsewhere.operationId, amountMinor: '41000', destination: ELSEWHERE }),
      transfer({ externalReference: otherMemo.operationId, amountMinor: '42000', memo: 'not-ours' }),
    ]);
    for (let i = 0; i < 3; i++) await worker().runOnce();
    for (const op of [elsewhere, otherMemo]) {
      expect((await env.operation(op.operationId)).state).not.toBe('CONFIRMED');
    }

    await reconcileTenant(ctx, env.tenantId);
    const [toElsewhere] = await breaksOf(env.tenantId, `operation:${elsewhere.operationId}`);
    expect(toElsewhere).toMatchObject({ breakClass: 'genuine_variance', status: 'open' });
    expect(toElsewhere?.details).toMatchObject({ differs: ['destination'] });
    const [memoBreak] = await breaksOf(env.tenantId, `operation:${otherMemo.operationId}`);
    expect(memoBreak?.details).toMatchObject({ differs: ['memo'] });
    for (const op of [elsewhere, otherMemo]) {
      expect((await env.operation(op.operationId)).state).not.toBe('CONFIRMED');
    }
  });

  it('I13-BRK C21 20,000 custodian transfers reconcile', async () => {
    const big = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
    try {
      const { tenantId } = await createTenant(env.t.db, {
        name: 'Many Transfers',
        assets: [{ code: 'BTC', network: 'bitcoin', decimals: 8, confirmations: 3 }],
      });
      await creditAsOperator(env.t.db, {
        tenantId,
        deposit: { reference: 'fund', accountId: 'acct-1', asset: 'BTC', amountMinor: '100000000' },
        idempotencyKey: 'fund',
        actor: 'test',
      });
      const template = await withTenant(env.t.db, tenantId, async (tx) => {
        const created = await createWithdrawal(tx, {
          tenantId,
          request: {
            withdrawalId: 'template',
            accountId: 'acct-1',
            asset: 'BTC',
            destination: BTC_DESTINATION,
            amountMinor: '1000',
          },
          idempotencyKey: 'withdrawal-template',
        });
        return created.operation;
      });
      // 20,000 settled custodian withdrawals, written in one statement (the paths that make
      // them one by one are tested elsewhere; this test is about reading the custodian's books).
      const settled = rowsOf<{ operation_id: string; amount_minor: string; provider_ref: string }>(
        await env.t.db.execute(sql`
          insert into operations (tenant_id, operation_id, kind, idempotency_key, reference, account_ref,
                                  asset_code, network, destination, amount_minor, policy_version,
                                  payload_hash, state, provider_ref, signed_artifact, approvals_required)
          select o.tenant_id, gen_random_uuid(), 'withdrawal', 'bulk-' || n, 'bulk-' || n, o.account_ref,
                 o.asset_code, o.network, o.destination, 1000 + n, o.policy_version, o.payload_hash,
                 'CONFIRMED', 'trf_bulk_' || n, o.signed_artifact, 0
            from operations o, generate_series(1, 20000) n
           where o.tenant_id = ${tenantId} and o.operation_id = ${template.operationId}
          returning operation_id::text, amount_minor::text, provider_ref`),
      );
      expect(settled).toHaveLength(20_000);
      // The custodian's books in the same order; the last one went elsewhere.
      const last = settled.at(-1)?.operation_id;
      await big.seed(
        settled.map((op) =>
          transfer({
            id: op.provider_ref,
            externalReference: op.operation_id,
            amountMinor: op.amount_minor,
            destination: op.operation_id === last ? ELSEWHERE : BTC_DESTINATION,
          }),
        ),
      );

      const started = Date.now();
      const report = await reconcileTenant(contextFor(big), tenantId);
      const elapsedMs = Date.now() - started;
      expect(report.checkedCustodianTransfers).toBe(20_000);
      expect(report.checkedOperations).toBe(20_000);
      expect(report.findings).toEqual([
        expect.objectContaining({ breakClass: 'genuine_variance', subject: `operation:${last}` }),
      ]);
      expect(elapsedMs).toBeLessThan(30_000);
    } finally {
      await big.stop();
    }
  });
});
