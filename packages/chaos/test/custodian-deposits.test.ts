/**
 * I13-BTC: the seed-18 I4 difference of -1,949,311 sat on the BTC omnibus account. Seed 18's
 * webhook deposit 8 is 1,949,310 sat and draws the `conflicting-body` fault (a replay of the event
 * id with the amount + 1). Its original body's four deliveries met server 0 killed (t+15.6 s, and
 * a restart that is slow on a loaded machine): no 2xx, so the depositor sent the changed body
 * next, which was then the first body the intake stored for that id and was credited (1,949,311).
 * The harness funds the custodian simulator only with deposits acknowledged with their original
 * body, so the custodian held none of it: ledger 1,949,311 more than the custodian.
 *
 * These tests play the intake with a plain HTTP server (it stores the first body per event id, as
 * `inbox_events` does) and fix the harness, not the ledger: the ledger credited the one body it
 * was given, once.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTenant, creditAsOperator } from '@idem/core';
import { createTestDatabase, serverUrl } from '@idem/testing/database';
import postgres from 'postgres';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { btcTheCustodianHolds, deliverEvent, newDepositLog, type WebhookDeposit } from '../src/deposits.ts';
import { newIntegratorLog } from '../src/integrators.ts';
import { checkInvariants } from '../src/invariants.ts';

const databaseUrl = serverUrl();

const secret = `whsec_${Buffer.from('i13-btc-test-secret-0123456789').toString('base64')}`;

interface Intake {
  url: string;
  /** Every body that reached the intake, in order: event id and amount. */
  seen: { eventId: string; amountMinor: string }[];
  /** The first body stored per event id. */
  stored: Map<string, string>;
  server: Server;
}

/**
 * `answer(n)` decides what the n-th request (1-based) gets: 'unreachable' (a 502 from the proxy
 * in front of a dead server: nothing stored), 'lost' (stored, then the socket is reset before the
 * answer), or 'ok'.
 */
async function startIntake(answer: (n: number) => 'unreachable' | 'lost' | 'ok'): Promise<Intake> {
  const seen: Intake['seen'] = [];
  const stored = new Map<string, string>();
  let n = 0;
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      n += 1;
      const what = answer(n);
      if (what === 'unreachable') {
        response.writeHead(502).end();
        return;
      }
      const eventId = String(request.headers['webhook-id']);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data: { amountMinor: string } };
      seen.push({ eventId, amountMinor: body.data.amountMinor });
      if (!stored.has(eventId)) stored.set(eventId, body.data.amountMinor);
      if (what === 'lost') request.socket.destroy();
      else response.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"received"}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/webhooks/ep`, seen, stored, server };
}

function deposit8(): WebhookDeposit {
  return {
    eventId: 'evt_s18_dep_8',
    reference: 's18-custody-deposit-8',
    address: 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4',
    accountId: 'acct-0',
    amountMinor: '1949310',
    acknowledged: false,
    conflictingBodiesSent: 0,
    deliveries: 0,
  };
}

let intake: Intake | null = null;
afterEach(async () => {
  await new Promise<void>((resolve) => intake?.server.close(() => resolve()) ?? resolve());
  intake = null;
});

describe('I13-BTC custodian deposits in the chaos harness', () => {
  it('I13-BTC a changed body is only a replay: when the original never got through, no changed amount reaches the intake', async () => {
    // The original's four deliveries find the server down; afterwards it answers again.
    intake = await startIntake((n) => (n <= 4 ? 'unreachable' : 'ok'));
    const url = intake.url;
    const event = deposit8();
    await deliverEvent(
      { webhook: { url: () => url, secret } },
      new Webhook(secret),
      event,
      'conflicting-body',
    );
    expect(event.acknowledged).toBe(false);
    // Today: the +1 body is the first the intake stores, and it would be credited.
    expect(intake.stored.get(event.eventId) ?? null).not.toBe('1949311');
    expect(intake.seen.filter((body) => body.amountMinor !== event.amountMinor)).toEqual([]);
  }, 30_000);

  it('I13-BTC a notification whose every answer was lost is delivered again with the same body', async () => {
    // Stored on the first delivery; every answer is reset, so the depositor never sees a 2xx.
    intake = await startIntake(() => 'lost');
    const url = intake.url;
    const event = deposit8();
    await deliverEvent({ webhook: { url: () => url, secret } }, new Webhook(secret), event, 'normal');
    expect(event.acknowledged).toBe(false);
    expect(intake.stored.get(event.eventId)).toBe('1949310');
  }, 30_000);

  it('I13-BTC the custodian holds every deposit it received, whether or not a notification got through', () => {
    const event = deposit8();
    // What no notification brought, the poller finds on the custodian's books and credits.
    expect(btcTheCustodianHolds([event, { ...event, acknowledged: true }])).toBe(3_898_620n);
    expect(btcTheCustodianHolds([])).toBe(0n);
  });
});

describe.skipIf(!databaseUrl)('I13-BTC I5 judges every credited custodian deposit', () => {
  it('I13-BTC a credit of a changed amount fails I5 even when the original body was never acknowledged', async () => {
    const t = await createTestDatabase({ maxConnections: 2 });
    const reader = postgres(t.url as string, { max: 1, onnotice: () => {} });
    try {
      const { tenantId } = await createTenant(t.db, {
        name: 'I13 Exchange',
        assets: [{ code: 'BTC', network: 'bitcoin', decimals: 8, confirmations: 1 }],
      });
      // What seed 18 left in the ledger: deposit 8 credited with the changed body's amount.
      await creditAsOperator(t.db, {
        tenantId,
        deposit: {
          reference: 's18-custody-deposit-8',
          accountId: 'acct-0',
          asset: 'BTC',
          amountMinor: '1949311',
        },
        idempotencyKey: 'custodian-deposit-s18-custody-deposit-8',
        actor: 'test',
      });
      const deposits = newDepositLog();
      deposits.webhooks.push({ ...deposit8(), conflictingBodiesSent: 1, deliveries: 8 });
      const checks = await checkInvariants({
        sql: reader,
        balanceRuns: [],
        tenants: [],
        custodianTenantId: tenantId,
        chain: { head: 0, hotWalletTransfers: [], depositTransfers: [] },
        custodian: { transfers: [], deposits: [], countsByReference: {}, webhookDeliveries: [] },
        integrators: newIntegratorLog(),
        deposits,
        landed: { depositWatcher: false, inboxProcessing: true, reconciliation: true },
        broadcast: [],
      });
      const i5 = checks.find((check) => check.id === 'I5');
      expect(i5?.violations).toEqual([
        'custodian deposit s18-custody-deposit-8 of 1949310 credited as 1949311 (a changed body must be quarantined)',
      ]);
    } finally {
      await reader.end();
      await t.dispose();
    }
  }, 60_000);
});
