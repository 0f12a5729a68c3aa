/**
 * I13-BAL a custodian account shared by three tenants (omnibus) is reconciled once per worker pass:
 * the custodian's one reported balance against the SUM of the three ledgers, which the database
 * returns per asset through a SECURITY DEFINER function without any tenant reading another's rows.
 * Compared tenant by tenant, each ledger would be a fraction of the balance and every tenant would
 * break; compared as a sum, agreement is no break, and a misreported balance is a break in each.
 * Real PostgreSQL (or PGlite), the custodian simulator as its own process.
 */
import { randomBytes } from 'node:crypto';
import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  getOperation,
  getRun,
  listBreaks,
  listRuns,
  rowsOf,
  withTenant,
} from '@idem/core';
import { createCustodianAdapter, generateWebhookSecret } from '@idem/rails';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RailsConfig } from '../src/rails.ts';
import { type Environment, passAndReconcile, startEnvironment } from './environment.ts';

const ACCOUNT = 'shared-1';
const BTC_DESTINATION = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
const DEPOSITS = [100_000n, 250_000n, 650_000n];

let env: Environment;
let simulator: SimulatorProcess;
let rails: RailsConfig;
let balanceReads = 0;
const members: string[] = [];

beforeAll(async () => {
  env = await startEnvironment();
  simulator = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
  await simulator.control({ settlement: { outcome: 'complete', afterMs: 20 } });
  const adapter = createCustodianAdapter({ baseUrl: simulator.url, timeoutMs: 2_000 });
  rails = {
    custodianAccount: ACCOUNT,
    custodian: {
      ...adapter,
      balances: () => {
        balanceReads += 1;
        return adapter.balances();
      },
    },
  };
  for (const [index, amount] of DEPOSITS.entries()) {
    const { tenantId } = await createTenant(env.t.db, {
      name: `Omnibus member ${index} ${randomBytes(2).toString('hex')}`,
      assets: [{ code: 'BTC', network: 'bitcoin', decimals: 8, confirmations: 3 }],
      custodianAccount: ACCOUNT,
    });
    await creditAsOperator(env.t.db, {
      tenantId,
      deposit: { reference: 'opening', accountId: 'acct-1', asset: 'BTC', amountMinor: amount.toString() },
      idempotencyKey: 'opening',
      actor: 'test',
    });
    await provisionRiskPolicy(env.t.db, {
      tenantId,
      assetCode: 'BTC',
      autoApproveMaxMinor: '1000000',
      fourEyesMinMinor: '100000000',
      actor: 'test',
    });
    members.push(tenantId);
  }
  // The custodian received the three tenants' deposits into its one account.
  await simulator.control({
    fund: { asset: 'BTC', amountMinor: DEPOSITS.reduce((a, b) => a + b, 0n).toString() },
  });
});
afterAll(async () => {
  await simulator.stop();
  await env.close();
});

const breaksOf = (tenantId: string) =>
  withTenant(env.t.db, tenantId, (tx) => listBreaks(tx, { tenantId, status: 'open' }));
const latestRun = async (tenantId: string) => {
  const [run] = await withTenant(env.t.db, tenantId, (tx) => listRuns(tx, { tenantId, limit: 1 }));
  if (!run) throw new Error('no run');
  return withTenant(env.t.db, tenantId, (tx) => getRun(tx, { tenantId, runId: run.runId }));
};

describe('an omnibus custodian account', () => {
  it('I13-BAL C21 C22 shared by three tenants reconciles once per pass against the sum, with no false break', async () => {
    balanceReads = 0;
    await passAndReconcile(env, { rails, reconcileEveryMs: 1 });
    expect(balanceReads).toBe(1);
    for (const [index, tenantId] of members.entries()) {
      expect(await breaksOf(tenantId)).toEqual([]);
      const run = await latestRun(tenantId);
      expect(run.result).toBe('balanced');
      const figure = run.figures.find((f) => f.place === `custodian:${ACCOUNT}`);
      // Its own ledger beside the account's sum: the others' rows are never in its run.
      expect(figure).toMatchObject({
        assetCode: 'BTC',
        liabilitiesAvailableMinor: DEPOSITS[index]?.toString(),
        custodyControlMinor: DEPOSITS[index]?.toString(),
        expectedMinor: '1000000',
        observedMinor: '1000000',
        unexplainedMinor: '0',
        accountTenants: 3,
      });
      expect(figure?.reportedAt).not.toBeNull();
    }
  });

  it('I13-BAL a withdrawal of one member moves the account; the sum still agrees for all three', async () => {
    const [first] = members;
    if (!first) throw new Error('no member');
    const created = await withTenant(env.t.db, first, (tx) =>
      createWithdrawal(tx, {
        tenantId: first,
        request: {
          withdrawalId: 'w-1',
          accountId: 'acct-1',
          asset: 'BTC',
          destination: BTC_DESTINATION,
          amountMinor: '40000',
        },
        idempotencyKey: 'withdrawal-w-1',
      }),
    );
    const worker = env.worker({ rails, reconcileEveryMs: 60 * 60_000 });
    // Passes until the custodian has settled it.
    await vi.waitFor(
      async () => {
        await worker.runOnce();
        const op = await withTenant(env.t.db, first, (tx) =>
          getOperation(tx, first, created.operation.operationId),
        );
        expect(op.state).toBe('CONFIRMED');
      },
      { timeout: 20_000, interval: 60 },
    );
    await passAndReconcile(env, { rails, reconcileEveryMs: 1 });
    for (const tenantId of members) {
      expect(await breaksOf(tenantId)).toEqual([]);
      const figure = (await latestRun(tenantId)).figures.find((f) => f.place === `custodian:${ACCOUNT}`);
      expect(figure).toMatchObject({
        expectedMinor: '960000',
        observedMinor: '960000',
        unexplainedMinor: '0',
      });
    }
  });

  it('I13-BAL C21 a custodian that misreports the shared balance is a genuine_variance break in every member', async () => {
    await simulator.control({ misreportBalance: { asset: 'BTC', deltaMinor: '-1500' } });
    await passAndReconcile(env, { rails, reconcileEveryMs: 1 });
    for (const tenantId of members) {
      const breaks = await breaksOf(tenantId);
      expect(
        breaks.map((b) => [b.breakClass, b.subject, b.ledgerAmountMinor, b.observedAmountMinor]),
      ).toEqual([['genuine_variance', `balance:custodian:${ACCOUNT}:BTC`, '960000', '958500']]);
      expect(breaks[0]?.owner).toBe('finance-controller');
      expect((breaks[0]?.details as { reportedAt?: string } | undefined)?.reportedAt).toBeTruthy();
    }
    await simulator.control({ misreportBalance: null });
  });

  it('I13-BAL a custodian deposit received but not yet credited explains the gap, once, in its own tenant', async () => {
    const [, second] = members;
    if (!second) throw new Error('no member');
    // The custodian holds a deposit the ledger has not credited yet: its webhook (and the poller's
    // copy of the same deposit) are in the inbox, not yet processed.
    await simulator.control({ fund: { asset: 'BTC', amountMinor: '20000' } });
    const body = (eventId: string) => ({
      type: 'deposit.confirmed',
      id: eventId,
      timestamp: new Date().toISOString(),
      data: { reference: 'custodian-dep-77', accountId: 'acct-1', asset: 'BTC', amountMinor: '20000' },
    });
    await withTenant(env.t.db, second, async (tx) => {
      for (const [source, eventId] of [
        ['custodian-webhooks', 'evt-dep-77'],
        ['custodian', 'poll:deposit:custodian-dep-77'],
      ] as const) {
        await tx.execute(sql`insert into inbox_events
          (tenant_id, source, event_id, endpoint_id, event_type, body_sha256, body, status)
          values (${second}::uuid, ${source}, ${eventId}, 'test', 'deposit.confirmed', ${'0'.repeat(64)},
                  ${JSON.stringify(body(eventId))}::jsonb, 'RECEIVED')`);
      }
    });
    await passAndReconcile(env, { rails, reconcileEveryMs: 1 });
    for (const tenantId of members) {
      const figure = (await latestRun(tenantId)).figures.find((f) => f.place === `custodian:${ACCOUNT}`);
      expect(figure).toMatchObject({
        expectedMinor: '960000',
        observedMinor: '980000',
        unexplainedMinor: '0',
      });
      const kinds = figure?.explanations.map((e) => [e.kind, e.amountMinor]);
      expect(kinds).toEqual(
        tenantId === second
          ? [['custodian_deposit_seen_not_credited', '20000']]
          : [['other_tenants_in_flight', '20000']],
      );
    }
  });

  it('I13-BAL C22 the account sum is refused inside a tenant scope: a tenant request cannot read it', async () => {
    const [first] = members;
    if (!first) throw new Error('no member');
    const refused = await withTenant(env.t.db, first, (tx) =>
      tx.execute(sql`select * from idem_custodian_account_ledger(${ACCOUNT}, '{bitcoin}'::text[])`),
    ).then(
      () => null,
      (error: unknown) => error as { cause?: { message?: string; code?: string } },
    );
    expect(refused?.cause).toMatchObject({
      code: '42501',
      message: expect.stringMatching(/outside any tenant/),
    });
    // And the member's own scope shows none of the other members' balances.
    const visible = await withTenant(env.t.db, first, async (tx) =>
      rowsOf<{ tenant_id: string }>(await tx.execute(sql`select distinct tenant_id::text from balances`)),
    );
    expect(visible.map((row) => row.tenant_id)).toEqual([first]);
  });
});
