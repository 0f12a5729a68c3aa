/**
 * The custodian adapter against the simulator running as its own process over real HTTP. Each
 * misbehaviour must give the classification the adapter promises, and the simulator's ledger must
 * show exactly one transfer per reference when the caller follows the rule: on ambiguous, look up
 * by reference before any resend.
 */
import { randomUUID } from 'node:crypto';
import {
  type SimulatorProcess,
  spawnSimulator,
  startWebhookReceiver,
  type WebhookReceiver,
} from '@idem/testing/custodian';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type CustodianAdapter,
  createCustodianAdapter,
  type SubmitOutcome,
  verifyWebhook,
  WebhookRejectedError,
} from '../src/custodian/adapter.ts';
import type { CreateTransferBody } from '../src/custodian/protocol.ts';
import { faultHeader, generateWebhookSecret } from '../src/custodian/simulator.ts';

const secret = generateWebhookSecret();
let simulator: SimulatorProcess;
let receiver: WebhookReceiver;
let adapter: CustodianAdapter;

const transferRequest = (overrides: Partial<CreateTransferBody> = {}): CreateTransferBody => ({
  externalReference: `op_${randomUUID()}`,
  asset: 'ETH',
  amountMinor: '1500000000000000000',
  destination: '0x000000000000000000000000000000000000dEaD',
  ...overrides,
});

/**
 * The caller's rule, as a worker will apply it: submit once; on ambiguous, look up by reference;
 * resend (same reference) only when the custodian shows nothing. Bounded to `attemptsMax` sends.
 */
async function submitFollowingTheRule(
  request: CreateTransferBody,
  attemptsMax = 2,
): Promise<{ result: 'acknowledged' | 'rejected' | 'unknown'; sends: number; lookups: number }> {
  let sends = 0;
  let lookups = 0;
  for (;;) {
    sends++;
    const outcome = await adapter.submit(request, { timeoutMs: 500 });
    if (outcome.outcome !== 'ambiguous') return { result: outcome.outcome, sends, lookups };
    lookups++;
    const found = await adapter.lookupByReference(request.externalReference);
    if (found.found !== 'none')
      return { result: found.found === 'one' ? 'acknowledged' : 'unknown', sends, lookups };
    if (sends >= attemptsMax) return { result: 'unknown', sends, lookups };
  }
}

beforeAll(async () => {
  receiver = await startWebhookReceiver(secret);
  simulator = await spawnSimulator({ webhookSecret: secret, webhookUrl: receiver.url });
  adapter = createCustodianAdapter({ baseUrl: simulator.url, timeoutMs: 2_000 });
});
afterAll(async () => {
  await simulator?.stop();
  await receiver?.close();
});
beforeEach(async () => {
  await simulator.control({ reset: true, webhooks: { url: receiver.url } });
  receiver.clear();
});

describe('submit classification', () => {
  it('acknowledges a transfer that echoes our reference; a second submit returns the same transfer, never a second', async () => {
    const request = transferRequest();
    const first = await adapter.submit(request);
    expect(first).toMatchObject({ outcome: 'acknowledged', via: 'reference', replayed: false });
    const second = await adapter.submit(request);
    expect(second).toMatchObject({ outcome: 'acknowledged', replayed: true });
    if (first.outcome !== 'acknowledged' || second.outcome !== 'acknowledged') throw new Error('unreachable');
    expect(second.transfer.id).toBe(first.transfer.id);
    expect((await simulator.ledger()).countsByReference[request.externalReference]).toBe(1);
  });

  it('C13 accept-then-timeout: ambiguous (timeout); lookup by reference finds the transfer; exactly one transfer', async () => {
    await simulator.control({ fault: 'accept-then-timeout', faultTimes: 1 });
    const request = transferRequest();
    const started = Date.now();
    expect(await adapter.submit(request, { timeoutMs: 400 })).toMatchObject({
      outcome: 'ambiguous',
      reason: 'timeout',
    });
    expect(Date.now() - started).toBeLessThan(1_500);

    const found = await adapter.lookupByReference(request.externalReference);
    expect(found).toMatchObject({ found: 'one', transfer: { externalReference: request.externalReference } });
    expect((await simulator.ledger()).countsByReference[request.externalReference]).toBe(1);
  });

  it("C13 the caller's AbortSignal ends a hung submit as ambiguous, not as failure", async () => {
    await simulator.control({ fault: 'accept-then-timeout', faultTimes: 1 });
    const request = transferRequest();
    const outcome = await adapter.submit(request, { signal: AbortSignal.timeout(300), timeoutMs: 10_000 });
    expect(outcome).toMatchObject({ outcome: 'ambiguous', reason: 'timeout' });
    expect(await adapter.lookupByReference(request.externalReference)).toMatchObject({ found: 'one' });
  });

  it('C13 5xx after accepting: ambiguous (http_status), and the transfer exists', async () => {
    await simulator.control({ fault: 'accept-then-5xx', faultTimes: 1 });
    const request = transferRequest();
    expect(await adapter.submit(request)).toMatchObject({ outcome: 'ambiguous', reason: 'http_status' });
    expect(await adapter.lookupByReference(request.externalReference)).toMatchObject({ found: 'one' });
  });

  it('C13 connection reset after accepting: ambiguous (connection), and the transfer exists', async () => {
    await simulator.control({ fault: 'accept-then-reset', faultTimes: 1 });
    const request = transferRequest();
    expect(await adapter.submit(request)).toMatchObject({ outcome: 'ambiguous', reason: 'connection' });
    expect(await adapter.lookupByReference(request.externalReference)).toMatchObject({ found: 'one' });
  });

  it('a clean 4xx refusal is rejected with its reason, and the custodian holds nothing under our reference', async () => {
    await simulator.control({ fault: 'reject', faultTimes: 1 });
    const request = transferRequest();
    expect(await adapter.submit(request)).toEqual({
      outcome: 'rejected',
      status: 422,
      reason: 'destination refused by custody policy',
    });
    expect(await adapter.lookupByReference(request.externalReference)).toEqual({ found: 'none' });
    expect((await simulator.ledger()).transfers).toHaveLength(0);
  });

  it('C16 a 200 without our reference or a provider id is ambiguous, even though the custodian recorded it', async () => {
    await simulator.control({ fault: 'ok-without-reference', faultTimes: 1 });
    const request = transferRequest();
    const outcome = await adapter.submit(request);
    expect(outcome).toMatchObject({ outcome: 'ambiguous', reason: 'no_reference' });
    expect(await adapter.lookupByReference(request.externalReference)).toMatchObject({ found: 'one' });
  });

  it('C16 a 200 with only a durable provider id is acknowledged once lookup resolves that id to our reference', async () => {
    await simulator.control({ fault: 'ok-id-only', faultTimes: 1 });
    const request = transferRequest();
    const outcome = await adapter.submit(request);
    expect(outcome).toMatchObject({
      outcome: 'acknowledged',
      via: 'provider_id',
      transfer: { externalReference: request.externalReference },
    });
  });

  it('our reference reused with other terms is a conflict (ambiguous), never "nothing happened"', async () => {
    const request = transferRequest();
    expect((await adapter.submit(request)).outcome).toBe('acknowledged');
    const changed = await adapter.submit({ ...request, amountMinor: '1' });
    expect(changed).toMatchObject({ outcome: 'ambiguous', reason: 'reference_conflict' });
    expect((await simulator.ledger()).countsByReference[request.externalReference]).toBe(1);
  });

  it('a custodian that cannot be reached is ambiguous (connection), and lookup throws rather than answer "none"', async () => {
    const nowhere = createCustodianAdapter({ baseUrl: 'http://127.0.0.1:9', timeoutMs: 500 });
    expect(await nowhere.submit(transferRequest())).toMatchObject({
      outcome: 'ambiguous',
      reason: 'connection',
    });
    await expect(nowhere.lookupByReference('op_x')).rejects.toThrow();
  });
});

describe('the simulator keeps exactly one transfer per reference for a caller that reconciles before resending (the rule the workers follow, C14 evidence in workers/test/custodian-rail)', () => {
  const faults = [
    'accept-then-timeout',
    'accept-then-5xx',
    'accept-then-reset',
    'ok-without-reference',
  ] as const;

  for (const idempotency of ['reference', 'none'] as const) {
    it(`every ambiguous fault ends with one transfer (provider idempotency: ${idempotency})`, async () => {
      await simulator.control({ idempotency });
      for (const fault of faults) {
        await simulator.control({ fault, faultTimes: 1 });
        const request = transferRequest();
        const run = await submitFollowingTheRule(request);
        expect(run, fault).toEqual({ result: 'acknowledged', sends: 1, lookups: 1 });
        expect((await simulator.ledger()).countsByReference[request.externalReference], fault).toBe(1);
      }
    });
  }

  it('contrast: against a provider without idempotency, a blind resend after a timeout makes a second transfer', async () => {
    // This is the failure the rule prevents; it shows the ledger count above could fail.
    await simulator.control({ idempotency: 'none', fault: 'accept-then-timeout', faultTimes: 1 });
    const request = transferRequest();
    const first: SubmitOutcome = await adapter.submit(request, { timeoutMs: 300 });
    expect(first.outcome).toBe('ambiguous');
    expect((await adapter.submit(request)).outcome).toBe('acknowledged');
    expect((await simulator.ledger()).countsByReference[request.externalReference]).toBe(2);
    // And lookup reports the anomaly instead of choosing one.
    expect(await adapter.lookupByReference(request.externalReference)).toMatchObject({ found: 'many' });
  });
});

describe('status webhooks (Standard Webhooks, verified on our side)', () => {
  const eventsOf = (reference: string) =>
    receiver.received.filter((r) => r.verified?.transfer?.externalReference === reference);

  it('delivers submitted then completed, each verified against the raw body', async () => {
    const request = transferRequest();
    await adapter.submit(request);
    await receiver.waitFor(2);
    const events = eventsOf(request.externalReference);
    expect(events.map((e) => e.verified?.type)).toEqual(['transfer.submitted', 'transfer.completed']);
    expect(events[1]?.verified?.transfer).toMatchObject({
      status: 'completed',
      txHash: expect.stringMatching(/^0x/),
    });
  });

  it('a failed settlement sends transfer.failed with a reason', async () => {
    await simulator.control({ settlement: { outcome: 'fail', afterMs: 10 } });
    const request = transferRequest();
    await adapter.submit(request);
    const [, failed] = await receiver.waitFor(2);
    expect(failed?.verified).toMatchObject({ type: 'transfer.failed', transfer: { status: 'failed' } });
  });

  it('simulator misbehaviour for the C18 intake tests: the same webhook id and body arrive twice', async () => {
    await simulator.control({ webhooks: { delivery: 'duplicate' } });
    await adapter.submit(transferRequest());
    const received = await receiver.waitFor(4);
    const ids = received.map((r) => r.verified?.webhookId);
    expect(ids[0]).toBe(ids[1]);
    expect(received[0]?.rawBody).toBe(received[1]?.rawBody);
    expect(new Set(ids).size).toBe(2);
  });

  it('simulator misbehaviour for the C18 intake tests: completed arrives before submitted', async () => {
    await simulator.control({ webhooks: { delivery: 'out-of-order' } });
    await adapter.submit(transferRequest());
    const received = await receiver.waitFor(2);
    expect(received.map((r) => r.verified?.type)).toEqual(['transfer.completed', 'transfer.submitted']);
  });

  it('late delivery: nothing arrives before the delay, then both events do', async () => {
    await simulator.control({ webhooks: { delivery: 'late', lateMs: 600 } });
    await adapter.submit(transferRequest());
    // Fixed: proves nothing arrives before the 600 ms delay; absence cannot be polled for.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.received).toHaveLength(0);
    expect((await receiver.waitFor(2, 3_000)).every((r) => r.verified !== null)).toBe(true);
  });

  it('simulator misbehaviour for the C19 intake tests: same webhook id with a different body, both verify, so only the inbox can catch the conflict', async () => {
    await simulator.control({
      webhooks: { delivery: 'conflicting-body' },
      settlement: { outcome: 'hold', afterMs: 0 },
    });
    await adapter.submit(transferRequest());
    const [first, second] = await receiver.waitFor(2);
    expect(first?.verified?.webhookId).toBe(second?.verified?.webhookId);
    expect(first?.rawBody).not.toBe(second?.rawBody);
    expect(first?.verified?.transfer?.amountMinor).not.toBe(second?.verified?.transfer?.amountMinor);
  });

  it('C20 a wrong secret, a tampered body, a missing header or a stale timestamp is refused before parsing', () => {
    const body = JSON.stringify({
      type: 'transfer.completed',
      occurredAt: new Date().toISOString(),
      data: {},
    });
    const now = new Date();
    const sign = (s: string, at: Date) => ({
      'webhook-id': 'msg_1',
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(s).sign('msg_1', at, body),
    });
    const otherTenantSecret = generateWebhookSecret();
    expect(() => verifyWebhook(body, sign(otherTenantSecret, now), secret)).toThrow(WebhookRejectedError);
    expect(() => verifyWebhook(body.replace('completed', 'failed'), sign(secret, now), secret)).toThrow(
      WebhookRejectedError,
    );
    const { 'webhook-signature': _dropped, ...unsigned } = sign(secret, now);
    expect(() => verifyWebhook(body, unsigned, secret)).toThrow(WebhookRejectedError);
    const stale = new Date(now.getTime() - 10 * 60_000);
    expect(() => verifyWebhook(body, sign(secret, stale), secret)).toThrow(WebhookRejectedError);
    // A correctly signed body of a known type whose data is malformed is refused too.
    expect(() => verifyWebhook(body, sign(secret, now), secret)).toThrow(/malformed/);
  });

  it('simulator misbehaviour for the C19 intake tests: an unknown event type verifies and is returned without a transfer', () => {
    const body = JSON.stringify({
      type: 'wallet.frozen',
      occurredAt: new Date().toISOString(),
      data: { x: 1 },
    });
    const at = new Date();
    const verified = verifyWebhook(
      body,
      {
        'webhook-id': 'msg_2',
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': new Webhook(secret).sign('msg_2', at, body),
      },
      secret,
    );
    expect(verified).toMatchObject({ webhookId: 'msg_2', type: 'wallet.frozen', transfer: null });
  });
});

describe('control endpoint', () => {
  it('a per-request fault header applies to that request only; an unknown fault is refused', async () => {
    const post = (request: CreateTransferBody, fault: string) =>
      fetch(`${simulator.url}/v1/transfers`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [faultHeader]: fault },
        body: JSON.stringify(request),
      });
    const refused = transferRequest();
    expect((await post(refused, 'reject')).status).toBe(422);
    expect((await post(transferRequest(), 'explode')).status).toBe(400);
    // The next request without the header behaves normally.
    expect((await adapter.submit(refused)).outcome).toBe('acknowledged');
    expect((await simulator.ledger()).transfers).toHaveLength(1);
  });

  it('refuses a malformed control body (zod) and changes nothing', async () => {
    const response = await fetch(`${simulator.url}/_control`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ fault: 'explode' }),
    });
    expect(response.status).toBe(400);
    expect((await adapter.submit(transferRequest())).outcome).toBe('acknowledged');
  });
});
