import { randomUUID } from 'node:crypto';
import { getBalances, listBreaks, recordInboxEvent, rowsOf, toView, withTenant } from '@idem/core';
import { createCustodianAdapter, generateWebhookSecret } from '@idem/rails';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, startEnvironment } from './environment.ts';

const BTC_DESTINATION = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';

let env: Environment;
let simulator: SimulatorProcess;

beforeAll(async () => {
  env = await startEnvironment();
  simulator = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
  // The custodian accepts but never settles on its own: only its webhooks say what happened.
  await simulator.control({ settlement: { outcome: 'hold', afterMs: 0 } });
});
afterAll(async () => {
  await simulator.stop();
  await env.close();
});

const worker = () =>
  env.worker({
    rails: {
      evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID },
      custodian: createCustodianAdapter({ baseUrl: simulator.url }),
    },
  });

/** A delivery exactly as the intake records it after verifying the signature. */
function deliver(eventId: string, body: unknown) {
  return withTenant(env.t.db, env.tenantId, (tx) =>
    recordInboxEvent(tx, {
      tenantId: env.tenantId,
      endpointId: 'we-test',
      source: 'custodian',
      eventId,
      rawBody: JSON.stringify(body),
    }),
  );
}

function transferEvent(
  type: string,
  operationId: string,
  amountMinor: string,
  status: string,
  /** The custodian's own id for the transfer (the one stored at acknowledgment, when there is one). */
  id = `trf_${operationId}`,
) {
  return {
    type,
    occurredAt: new Date().toISOString(),
    data: {
      id,
      externalReference: operationId,
      asset: 'BTC',
      amountMinor,
      destination: BTC_DESTINATION,
      status,
    },
  };
}

async function inboxStatus(eventId: string): Promise<string | undefined> {
  const rows = rowsOf<{ status: string }>(
    await env.t.db.execute(sql`select status from inbox_events where event_id = ${eventId}`),
  );
  return rows[0]?.status;
}

async function transitionsBy(operationId: string, actor: string): Promise<number> {
  const rows = rowsOf<{ n: number }>(
    await env.t.db.execute(
      sql`select count(*)::int as n from operation_transitions where operation_id = ${operationId} and actor = ${actor}`,
    ),
  );
  return rows[0]?.n ?? 0;
}

describe('inbound custodian events are applied once, and only where the state machine allows', () => {
  it('C18 a duplicated completion webhook confirms the withdrawal exactly once', async () => {
    const op = await env.withdraw(11_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    await worker().runOnce();
    const broadcast = await env.operation(op.operationId);
    expect(broadcast.state).toBe('BROADCAST');
    const body = transferEvent(
      'transfer.completed',
      op.operationId,
      '11000',
      'completed',
      broadcast.providerRef ?? '',
    );
    expect((await deliver('evt-complete-1', body)).outcome).toBe('ACCEPTED');
    expect((await deliver('evt-complete-1', body)).outcome).toBe('DUPLICATE');
    await worker().runOnce();
    expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
    expect(await inboxStatus('evt-complete-1')).toBe('PROCESSED');
    expect(await transitionsBy(op.operationId, 'webhook:custodian')).toBe(1);
  });

  it('I15 a completion webhook records the hash the custodian reports, once, for every withdrawal view', async () => {
    const op = await env.withdraw(11_500n, { asset: 'BTC', destination: BTC_DESTINATION });
    await worker().runOnce();
    const broadcast = await env.operation(op.operationId);
    expect(broadcast.state).toBe('BROADCAST');
    const reportedHash = `0x${'ab'.repeat(32)}`;
    // Under the custodian's own transfer id: a completion naming another id settles nothing (I13-BRK).
    const body = transferEvent(
      'transfer.completed',
      op.operationId,
      '11500',
      'completed',
      broadcast.providerRef ?? '',
    );
    await deliver('evt-complete-hash', { ...body, data: { ...body.data, txHash: reportedHash } });
    await worker().runOnce();
    const final = await env.operation(op.operationId);
    expect(final.state).toBe('CONFIRMED');
    expect(toView(final)).toMatchObject({ custodianTxHash: reportedHash, txHash: null });
    expect(toView(final).custodianTransferId).toBe(broadcast.providerRef);
    // The database keeps it final: a later, different report cannot overwrite what was shown.
    await expect(
      env.t.db.execute(
        sql`update operations set provider_tx_hash = '0xother' where operation_id = ${op.operationId}`,
      ),
    ).rejects.toThrow();
  });

  it('C19 an out-of-order event the state machine does not allow is parked, not forced', async () => {
    const op = await env.withdraw(12_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    // A failure report for a withdrawal that is still only REQUESTED: nothing was sent yet.
    await deliver('evt-early-fail', transferEvent('transfer.failed', op.operationId, '12000', 'failed'));
    const w = worker();
    await w.runOnce();
    expect(await inboxStatus('evt-early-fail')).toBe('PARKED');
    expect(['BROADCAST', 'SIGNED']).toContain((await env.operation(op.operationId)).state);
    expect(await transitionsBy(op.operationId, 'webhook:custodian')).toBe(0);
  });

  it('C19 a transfer the ledger does not know is parked and opens an unknown-operation break', async () => {
    const stranger = randomUUID();
    await deliver('evt-stranger', transferEvent('transfer.completed', stranger, '5000', 'completed'));
    await worker().runOnce();
    expect(await inboxStatus('evt-stranger')).toBe('PARKED');
    const breaks = await withTenant(env.t.db, env.tenantId, (tx) =>
      listBreaks(tx, { tenantId: env.tenantId, status: 'open' }),
    );
    expect(breaks.find((b) => b.subject === `custodian-transfer:trf_${stranger}`)?.breakClass).toBe(
      'unknown_operation',
    );
  });

  it('C19 a custodian report whose amount differs from the approved payload is parked with a variance break', async () => {
    const op = await env.withdraw(13_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    await worker().runOnce();
    await deliver(
      'evt-wrong-amount',
      transferEvent('transfer.completed', op.operationId, '13001', 'completed'),
    );
    await worker().runOnce();
    expect(await inboxStatus('evt-wrong-amount')).toBe('PARKED');
    expect((await env.operation(op.operationId)).state).toBe('BROADCAST');
    const breaks = await withTenant(env.t.db, env.tenantId, (tx) =>
      listBreaks(tx, { tenantId: env.tenantId, status: 'open' }),
    );
    expect(breaks.find((b) => b.subject === `operation:${op.operationId}`)).toMatchObject({
      breakClass: 'genuine_variance',
      ledgerAmountMinor: '13000',
      observedAmountMinor: '13001',
    });
  });

  it('C18 a deposit reported twice under two event ids is credited once', async () => {
    const deposit = {
      type: 'deposit.confirmed',
      data: { reference: 'btc-dep-1', accountId: 'acct-dep', asset: 'BTC', amountMinor: '7000' },
    };
    await deliver('evt-dep-a', deposit);
    await deliver('evt-dep-b', deposit);
    await worker().runOnce();
    expect(await inboxStatus('evt-dep-a')).toBe('PROCESSED');
    expect(await inboxStatus('evt-dep-b')).toBe('PROCESSED');
    const balances = await withTenant(env.t.db, env.tenantId, (tx) =>
      getBalances(tx, env.tenantId, 'acct-dep'),
    );
    expect(balances).toEqual([{ asset: 'BTC', available: '7000', held: '0' }]);
  });
});
