import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { listBreaks, recordInboxEvent, rowsOf, schema, withTenant } from '@idem/core';
import { createCustodianAdapter, generateWebhookSecret } from '@idem/rails';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import { and, eq, sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { CHAIN_ID, completedAtCustodian, type Environment, startEnvironment } from './environment.ts';

/**
 * Recovery of missed custodian events: a deposit or a withdrawal's completion whose
 * webhook was lost or never sent is found by the poller, which asks the custodian by time window
 * and hands what it finds to the same inbox the webhooks feed. Everything real: PostgreSQL (or
 * PGlite), the custodian simulator as its own process delivering signed webhooks over HTTP to an
 * intake that verifies them and records them exactly as the server's does.
 */

const BTC_DESTINATION = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
/** Two of the tenant's custodian deposit addresses, and one that belongs to no account of it. */
const ADDRESS_A = 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4';
const ADDRESS_B = '3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy';
const ADDRESS_FOREIGN = '1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2';

let env: Environment;
let simulator: SimulatorProcess;
let intake: Server;
const secret = generateWebhookSecret();
/** Every delivery the intake recorded, with what the inbox answered. */
const received: { eventId: string; type: string | null; outcome: string }[] = [];

beforeAll(async () => {
  env = await startEnvironment();
  intake = await startIntake();
  const { port } = intake.address() as AddressInfo;
  simulator = await spawnSimulator({ webhookSecret: secret, webhookUrl: `http://127.0.0.1:${port}/` });
  await env.registerDepositAddress('bitcoin', ADDRESS_A, 'acct-btc-a');
  await env.registerDepositAddress('bitcoin', ADDRESS_B, 'acct-btc-b');
});
afterAll(async () => {
  await simulator.stop();
  await new Promise((resolve) => intake.close(resolve));
  await env.close();
});
beforeEach(async () => {
  await simulator.control({
    webhooks: { delivery: 'normal', drop: [] },
    settlement: { outcome: 'complete', afterMs: 50 },
  });
});

/** The webhook intake: verify the signature over the raw body, record in the inbox, answer after commit. */
async function startIntake(): Promise<Server> {
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const rawBody = Buffer.concat(chunks).toString('utf8');
    const headers = {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    };
    try {
      new Webhook(secret).verify(rawBody, headers);
    } catch {
      response.writeHead(401).end();
      return;
    }
    const recorded = await withTenant(env.t.db, env.tenantId, (tx) =>
      recordInboxEvent(tx, {
        tenantId: env.tenantId,
        endpointId: 'we-custodian',
        source: 'custodian',
        eventId: headers['webhook-id'],
        rawBody,
      }),
    );
    received.push({ eventId: headers['webhook-id'], type: recorded.eventType, outcome: recorded.outcome });
    response.writeHead(204).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

function worker() {
  return env.worker({
    custodianPollEveryMs: 0,
    rails: {
      evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID },
      custodian: createCustodianAdapter({ baseUrl: simulator.url, timeoutMs: 2_000 }),
    },
  });
}

async function passes(w: ReturnType<typeof worker>, rounds: number): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    await w.runOnce();
    // Fixed: the passes themselves are what these tests count, not a condition; the pause moves the
    // wall-clock window the poller reads on between them.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function deposit(address: string, accountId: string, amountMinor: string, confirmedAt?: string) {
  const { deposit: made } = await simulator.control({
    deposit: {
      network: 'bitcoin',
      address,
      accountId,
      asset: 'BTC',
      amountMinor,
      ...(confirmedAt ? { confirmedAt } : {}),
    },
  });
  if (!made) throw new Error('the simulator made no deposit');
  return made;
}

const btcOf = (account: string) => env.available(account, 'BTC');

/** The deposit operations recorded for a custodian deposit reference (one, or the books are wrong). */
async function creditsOf(reference: string): Promise<number> {
  const rows = await withTenant(env.t.db, env.tenantId, (tx) =>
    tx
      .select({ id: schema.operations.operationId })
      .from(schema.operations)
      .where(
        and(
          eq(schema.operations.tenantId, env.tenantId),
          eq(schema.operations.kind, 'deposit'),
          eq(schema.operations.reference, reference),
        ),
      ),
  );
  return rows.length;
}

async function waitFor(what: string, check: () => boolean, timeoutMs = 5_000): Promise<void> {
  await vi.waitFor(
    () => {
      if (!check()) throw new Error(`timed out waiting for ${what}`);
    },
    { timeout: timeoutMs, interval: 25 },
  );
}

describe('recovery of missed custodian events', () => {
  it('I13-REC-1 every deposit webhook dropped: each custodian deposit to an address of ours is credited exactly once by the poller', async () => {
    await simulator.control({ webhooks: { drop: ['deposit.confirmed'] } });
    const before = { a: await btcOf('acct-btc-a'), b: await btcOf('acct-btc-b') };
    const first = await deposit(ADDRESS_A, 'acct-btc-a', '150000');
    const second = await deposit(ADDRESS_A, 'acct-btc-a', '2500');
    const third = await deposit(ADDRESS_B, 'acct-btc-b', '70000');
    const foreign = await deposit(ADDRESS_FOREIGN, 'acct-elsewhere', '999999');

    // Several passes: every window overlaps the previous one, so each deposit is read again.
    await passes(worker(), 4);

    expect(await btcOf('acct-btc-a')).toBe(before.a + 152_500n);
    expect(await btcOf('acct-btc-b')).toBe(before.b + 70_000n);
    for (const made of [first, second, third]) expect(await creditsOf(made.id)).toBe(1);
    // Someone else's deposit is not ours to credit: no account of ours moved for it.
    expect(await creditsOf(foreign.id)).toBe(0);
    expect(await btcOf('acct-elsewhere')).toBe(0n);
    // The webhooks really were never sent.
    const ledger = await simulator.ledger();
    expect(ledger.webhookDeliveries.filter((d) => d.type === 'deposit.confirmed')).toEqual([]);
  });

  it('I13-REC-2 a webhook that arrives after the poller credited is a replay, and a poll after a webhook credits nothing more', async () => {
    // Late: the poller gets there first, the webhook follows.
    await simulator.control({ webhooks: { delivery: 'late', lateMs: 1_500 } });
    const late = await deposit(ADDRESS_A, 'acct-btc-a', '4100');
    const before = await btcOf('acct-btc-a');
    const w = worker();
    await passes(w, 1);
    expect(await btcOf('acct-btc-a')).toBe(before + 4_100n);
    await waitFor('the late webhook', () => received.some((r) => r.eventId === `msg_${late.id}_deposit`));
    await passes(w, 2);
    expect(await btcOf('acct-btc-a')).toBe(before + 4_100n);
    expect(await creditsOf(late.id)).toBe(1);
    const handled = await withTenant(env.t.db, env.tenantId, (tx) =>
      tx
        .select({ status: schema.inboxEvents.status })
        .from(schema.inboxEvents)
        .where(
          and(
            eq(schema.inboxEvents.tenantId, env.tenantId),
            eq(schema.inboxEvents.eventId, `msg_${late.id}_deposit`),
          ),
        ),
    );
    expect(handled).toEqual([{ status: 'PROCESSED' }]);

    // Normal: the webhook first, then the poller reads the same deposit in its window.
    await simulator.control({ webhooks: { delivery: 'normal' } });
    const prompt = await deposit(ADDRESS_B, 'acct-btc-b', '5300');
    await waitFor('the webhook', () => received.some((r) => r.eventId === `msg_${prompt.id}_deposit`));
    const beforeB = await btcOf('acct-btc-b');
    await passes(w, 3);
    expect(await btcOf('acct-btc-b')).toBe(beforeB + 5_300n);
    expect(await creditsOf(prompt.id)).toBe(1);
  });

  it('I13-REC-3 a restarted worker resumes from the stored cursor: deposits made while it was down, one reported late, are credited once', async () => {
    await simulator.control({ webhooks: { drop: ['deposit.confirmed'] } });
    await passes(worker(), 1);
    const cursorBefore = await cursorOf();
    expect(cursorBefore).not.toBeNull();

    // The worker is gone. Deposits arrive; one is indexed late, stamped before the stored cursor.
    const during = await deposit(ADDRESS_A, 'acct-btc-a', '61000');
    const backdated = await deposit(
      ADDRESS_B,
      'acct-btc-b',
      '8000',
      new Date((cursorBefore ?? 0) - 60_000).toISOString(),
    );
    const before = { a: await btcOf('acct-btc-a'), b: await btcOf('acct-btc-b') };

    // A new worker with a new custodian client: all it has is the cursor in the database.
    await passes(worker(), 2);
    expect(await btcOf('acct-btc-a')).toBe(before.a + 61_000n);
    expect(await btcOf('acct-btc-b')).toBe(before.b + 8_000n);
    expect(await creditsOf(during.id)).toBe(1);
    expect(await creditsOf(backdated.id)).toBe(1);
    expect(await cursorOf()).toBeGreaterThan(cursorBefore ?? 0);
  });

  it('I13-REC-5 a webhook and a poll that disagree on the account conflict: one credit, the second parked, never two', async () => {
    // The custodian tags the deposit with an account other than the one our address is registered to.
    const tagged = await deposit(ADDRESS_A, 'acct-btc-mislabelled', '3300');
    await waitFor('the webhook', () => received.some((r) => r.eventId === `msg_${tagged.id}_deposit`));
    const before = await btcOf('acct-btc-a');
    await passes(worker(), 2);
    expect(await creditsOf(tagged.id)).toBe(1);
    const credited = (await btcOf('acct-btc-mislabelled')) + (await btcOf('acct-btc-a')) - before;
    expect(credited).toBe(3_300n);
    const events = await withTenant(env.t.db, env.tenantId, (tx) =>
      tx
        .select({ eventId: schema.inboxEvents.eventId, status: schema.inboxEvents.status })
        .from(schema.inboxEvents)
        .where(eq(schema.inboxEvents.tenantId, env.tenantId)),
    );
    const about = events.filter((e) => e.eventId.includes(tagged.id)).map((e) => e.status);
    expect(about.sort()).toEqual(['PARKED', 'PROCESSED']);
  });

  it('I13-REC-4 a withdrawal whose custodian webhooks were all lost is settled by the poller through the inbox rules, with one transfer', async () => {
    await simulator.control({
      webhooks: { drop: ['transfer.submitted', 'transfer.completed', 'transfer.failed'] },
      // Completed well after the pass that submits it: the next pass's poll is the first to see it.
      settlement: { outcome: 'complete', afterMs: 1_000 },
    });
    const op = await env.withdraw(40_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    const w = worker();
    await passes(w, 1);
    expect((await env.operation(op.operationId)).state).toBe('BROADCAST');
    await completedAtCustodian(simulator.url, op.operationId);
    await passes(w, 1);

    expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
    // The inbox applied it, from the event the poller recorded: no webhook was ever sent.
    const settledBy = rowsOf<{ actor: string }>(
      await env.t.db.execute(
        sql`select actor from operation_transitions where operation_id = ${op.operationId} and to_state = 'CONFIRMED'`,
      ),
    );
    expect(settledBy).toEqual([{ actor: 'webhook:custodian' }]);
    const polled = await withTenant(env.t.db, env.tenantId, (tx) =>
      tx
        .select({ eventId: schema.inboxEvents.eventId, status: schema.inboxEvents.status })
        .from(schema.inboxEvents)
        .where(
          and(
            eq(schema.inboxEvents.tenantId, env.tenantId),
            eq(schema.inboxEvents.endpointId, 'custodian-poller'),
          ),
        ),
    );
    const ledger = await simulator.ledger();
    const transfer = ledger.transfers.find((t) => t.externalReference === op.operationId);
    expect(polled.filter((e) => e.eventId.startsWith(`poll:${transfer?.id}:completed:`))).toEqual([
      expect.objectContaining({ status: 'PROCESSED' }),
    ]);
    expect(ledger.countsByReference[op.operationId]).toBe(1);
    expect(ledger.webhookDeliveries.filter((d) => d.body.includes(op.operationId))).toEqual([]);
    const breaks = await withTenant(env.t.db, env.tenantId, (tx) =>
      listBreaks(tx, { tenantId: env.tenantId, status: 'open' }),
    );
    expect(breaks.filter((b) => b.subject.includes(op.operationId))).toEqual([]);
  });
});

describe('recovery after a long downtime', () => {
  it('I13-REC-8 a poller three days behind catches up window by window, a bounded number per pass, missing nothing', async () => {
    await simulator.control({ webhooks: { drop: ['deposit.confirmed'] } });
    const now = Date.now();
    const hoursAgo = (hours: number) => new Date(now - hours * 3_600_000).toISOString();
    // The worker was down for three days: its position is where it stopped.
    await env.t.db.execute(
      sql`update chain_cursors set next_block = ${now - 72 * 3_600_000} where tenant_id = ${env.tenantId} and network = 'custodian'`,
    );
    const old = await deposit(ADDRESS_A, 'acct-btc-a', '11', hoursAgo(70));
    const middle = await deposit(ADDRESS_A, 'acct-btc-a', '22', hoursAgo(30));
    const recent = await deposit(ADDRESS_B, 'acct-btc-b', '33', hoursAgo(1));

    const w = worker();
    await passes(w, 1);
    // One pass reads at most eight 6-hour windows: 48 of the 72 hours.
    expect(await creditsOf(old.id)).toBe(1);
    expect(await creditsOf(middle.id)).toBe(1);
    expect(await creditsOf(recent.id)).toBe(0);
    await passes(w, 1);
    expect(await creditsOf(recent.id)).toBe(1);
    expect(await cursorOf()).toBeGreaterThanOrEqual(now);
  });
});

/** The poller's stored position (epoch milliseconds), or null before its first pass. */
async function cursorOf(): Promise<number | null> {
  const rows = rowsOf<{ next_block: string }>(
    await env.t.db.execute(
      sql`select next_block::text from chain_cursors where tenant_id = ${env.tenantId} and network = 'custodian'`,
    ),
  );
  return rows[0] ? Number(rows[0].next_block) : null;
}
