import { randomUUID } from 'node:crypto';
import { getBalances, listBreaks, recordInboxEvent, rowsOf, toView, withTenant } from '@idem/core';
import { createCustodianAdapter, generateWebhookSecret } from '@idem/rails';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, startEnvironment } from './environment.ts';

const BTC_DESTINATION = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
/** Custodian deposit addresses registered to the tenant's accounts, and one registered to none. */
const ADDRESS_DEP = 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4';
const ADDRESS_OWNED = '3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy';
const ADDRESS_INFLATED = 'bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3';
const ADDRESS_FOREIGN = '1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2';

let env: Environment;
let simulator: SimulatorProcess;

beforeAll(async () => {
  env = await startEnvironment();
  simulator = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
  // The custodian accepts but never settles on its own: only its webhooks say what happened.
  await simulator.control({ settlement: { outcome: 'hold', afterMs: 0 } });
  await env.registerDepositAddress('bitcoin', ADDRESS_DEP, 'acct-dep');
  await env.registerDepositAddress('bitcoin', ADDRESS_OWNED, 'acct-owner');
  await env.registerDepositAddress('bitcoin', ADDRESS_INFLATED, 'acct-inflated');
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

/** A deposit arriving at the custodian (on its books, as the custodian will report it). */
function depositAt(address: string, accountId: string, amountMinor: string) {
  return { network: 'bitcoin', address, accountId, asset: 'BTC', amountMinor };
}

/** A `deposit.confirmed` notification as its sender chose to sign it. */
function depositEvent(reference: string, accountId: string, amountMinor: string) {
  return { type: 'deposit.confirmed', data: { reference, accountId, asset: 'BTC', amountMinor } };
}

function balancesOf(accountId: string) {
  return withTenant(env.t.db, env.tenantId, (tx) => getBalances(tx, env.tenantId, accountId));
}

async function openBreakOn(subject: string) {
  const breaks = await withTenant(env.t.db, env.tenantId, (tx) =>
    listBreaks(tx, { tenantId: env.tenantId, status: 'open' }),
  );
  return breaks.find((b) => b.subject === subject);
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
    await simulator.control({ settleHeld: { externalReference: op.operationId, outcome: 'complete' } });
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
    await simulator.control({ settleHeld: { externalReference: op.operationId, outcome: 'complete' } });
    const reportedHash = (await simulator.ledger()).transfers.find(
      (t) => t.externalReference === op.operationId,
    )?.txHash;
    expect(reportedHash).toMatch(/^0x[0-9a-f]{64}$/);
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
    const { deposit: received } = await simulator.control({
      deposit: depositAt(ADDRESS_DEP, 'acct-dep', '7000'),
    });
    const deposit = depositEvent(received?.id ?? '', 'acct-dep', '7000');
    await deliver('evt-dep-a', deposit);
    await deliver('evt-dep-b', deposit);
    await worker().runOnce();
    expect(await inboxStatus('evt-dep-a')).toBe('PROCESSED');
    expect(await inboxStatus('evt-dep-b')).toBe('PROCESSED');
    expect(await balancesOf('acct-dep')).toEqual([{ asset: 'BTC', available: '7000', held: '0' }]);
  });
});

/**
 * Whoever holds an inbound source's secret (an admin who created or rotated it) can sign any
 * notification. A notification is a hint: the inbox credits what the custodian's own record of
 * the deposit says, to the account the deposit address is registered to, or nothing.
 */
describe('I31-INBOUND a deposit notification credits only what the custodian itself reports', () => {
  it('I31-INBOUND a signed notification of a deposit the custodian never received credits nothing and opens a break', async () => {
    await deliver('evt-forged-dep', depositEvent('dep_never_received', 'acct-forged', '900000000'));
    await worker().runOnce();
    expect(await inboxStatus('evt-forged-dep')).toBe('PARKED');
    expect(await balancesOf('acct-forged')).toEqual([]);
    expect(await openBreakOn('custodian-deposit:dep_never_received')).toMatchObject({
      breakClass: 'unknown_operation',
      observedAmountMinor: '900000000',
    });
  });

  it('I31-INBOUND a notification that inflates a real deposit credits only the amount received, with a variance break', async () => {
    const { deposit: received } = await simulator.control({
      deposit: depositAt(ADDRESS_INFLATED, 'acct-inflated', '5000'),
    });
    const reference = received?.id ?? '';
    await deliver('evt-inflated', depositEvent(reference, 'acct-inflated', '5000000'));
    await worker().runOnce();
    expect(await inboxStatus('evt-inflated')).toBe('PARKED');
    // The custodian's own feed (the poller's copy of the deposit) credits what it received.
    expect(await balancesOf('acct-inflated')).toEqual([{ asset: 'BTC', available: '5000', held: '0' }]);
    expect(await openBreakOn(`custodian-deposit:${reference}`)).toMatchObject({
      breakClass: 'genuine_variance',
      ledgerAmountMinor: '5000',
      observedAmountMinor: '5000000',
    });
  });

  it('I31-INBOUND a notification naming another account than the deposit address is registered to credits only that account', async () => {
    const { deposit: received } = await simulator.control({
      deposit: depositAt(ADDRESS_OWNED, 'acct-owner', '6000'),
    });
    await deliver('evt-redirected', depositEvent(received?.id ?? '', 'acct-thief', '6000'));
    await worker().runOnce();
    expect(await inboxStatus('evt-redirected')).toBe('PARKED');
    expect(await balancesOf('acct-thief')).toEqual([]);
    expect(await balancesOf('acct-owner')).toEqual([{ asset: 'BTC', available: '6000', held: '0' }]);
  });

  it('I31-INBOUND a deposit to an address the tenant never registered credits nothing', async () => {
    const { deposit: received } = await simulator.control({
      deposit: depositAt(ADDRESS_FOREIGN, 'acct-elsewhere', '4000'),
    });
    await deliver('evt-foreign', depositEvent(received?.id ?? '', 'acct-elsewhere', '4000'));
    await worker().runOnce();
    expect(await inboxStatus('evt-foreign')).toBe('PARKED');
    expect(await balancesOf('acct-elsewhere')).toEqual([]);
  });
});

/**
 * A transfer status in a notification is the sender's word too: it moves a withdrawal only when
 * the custodian, asked by our reference, reports that same status for the approved transfer.
 */
describe('I31-INBOUND a transfer notification moves a withdrawal only as far as the custodian reports', () => {
  it('I31-INBOUND a signed completion the custodian does not report leaves the withdrawal BROADCAST', async () => {
    const op = await env.withdraw(14_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    await worker().runOnce();
    const broadcast = await env.operation(op.operationId);
    expect(broadcast.state).toBe('BROADCAST');
    // The custodian holds the transfer as submitted; the notification says it completed.
    await deliver(
      'evt-forged-complete',
      transferEvent('transfer.completed', op.operationId, '14000', 'completed', broadcast.providerRef ?? ''),
    );
    await worker().runOnce();
    expect(await inboxStatus('evt-forged-complete')).toBe('PARKED');
    expect((await env.operation(op.operationId)).state).toBe('BROADCAST');
    expect(await transitionsBy(op.operationId, 'webhook:custodian')).toBe(0);
  });

  it('I31-INBOUND a signed failure for an UNKNOWN withdrawal the custodian holds does not release it', async () => {
    // The custodian records the transfer and never answers; its lookups fail too for this pass.
    await simulator.control({ fault: 'accept-then-timeout', faultTimes: 1 });
    const op = await env.withdraw(15_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    const adapter = createCustodianAdapter({ baseUrl: simulator.url, timeoutMs: 1_000 });
    await env
      .worker({
        rails: {
          evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID },
          custodian: {
            ...adapter,
            lookupByReference: () => Promise.reject(new Error('custodian unreachable')),
          },
        },
      })
      .runOnce();
    expect((await env.operation(op.operationId)).state).toBe('UNKNOWN');
    await deliver('evt-forged-fail', transferEvent('transfer.failed', op.operationId, '15000', 'failed'));
    await worker().runOnce();
    expect(await inboxStatus('evt-forged-fail')).toBe('PARKED');
    expect((await env.operation(op.operationId)).state).not.toBe('VERIFIED_NOT_SENT');
    expect(await transitionsBy(op.operationId, 'webhook:custodian')).toBe(0);
  });
});
