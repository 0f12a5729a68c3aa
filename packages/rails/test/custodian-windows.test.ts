/**
 * The custodian's time-window reads that missed-event recovery relies on, against the
 * simulator as its own process: every page of a window, only that window, oldest first; and the
 * misbehaviour the recovery tests need, a webhook type the simulator never sends.
 */

import {
  type SimulatorProcess,
  spawnSimulator,
  startWebhookReceiver,
  type WebhookReceiver,
} from '@idem/testing/custodian';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustodianAdapter } from '../src/custodian/adapter.ts';
import { generateWebhookSecret } from '../src/custodian/simulator.ts';

const secret = generateWebhookSecret();
let simulator: SimulatorProcess;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await startWebhookReceiver(secret);
  simulator = await spawnSimulator({ webhookSecret: secret, webhookUrl: receiver.url });
});
afterAll(async () => {
  await simulator.stop();
  await receiver.close();
});

const deposit = (amountMinor: string, confirmedAt?: string) =>
  simulator.control({
    deposit: {
      network: 'bitcoin',
      address: 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4',
      accountId: 'acct-1',
      asset: 'BTC',
      amountMinor,
      ...(confirmedAt ? { confirmedAt } : {}),
    },
  });

describe('custodian reads by time window', () => {
  it('I13-REC-7 a window of 230 deposits is read whole, oldest first, and nothing outside it', async () => {
    await simulator.control({ reset: true, webhooks: { drop: ['deposit.confirmed'] } });
    const start = Date.now() - 60_000;
    const inside: string[] = [];
    for (let i = 0; i < 230; i++) {
      const at = new Date(start + i * 100).toISOString();
      const made = (await deposit(String(1_000 + i), at)).deposit;
      if (made) inside.push(made.id);
    }
    await deposit('7', new Date(start - 1).toISOString()); // just before the window
    await deposit('8', new Date(start + 30_000).toISOString()); // at its end: excluded

    const adapter = createCustodianAdapter({ baseUrl: simulator.url });
    const read = await adapter.depositsBetween({ from: new Date(start), to: new Date(start + 30_000) });
    expect(read.map((d) => d.id)).toEqual(inside);
    expect(read.map((d) => Number(d.amountMinor))).toEqual(read.map((_, i) => 1_000 + i));
    // Dropped means never sent: not one deposit webhook went out.
    expect(receiver.received.filter((r) => r.rawBody.includes('deposit.confirmed'))).toEqual([]);
  });

  it('I13-REC-7 an empty or inverted window reads nothing and asks nothing', async () => {
    const adapter = createCustodianAdapter({ baseUrl: 'http://127.0.0.1:9' });
    const at = new Date();
    expect(await adapter.depositsBetween({ from: at, to: at })).toEqual([]);
    expect(await adapter.transfersUpdatedBetween({ from: at, to: new Date(at.getTime() - 1) })).toEqual([]);
  });

  it('I13-REC-7 a deposit webhook is delivered signed in the inbound deposit.confirmed shape unless dropped', async () => {
    await simulator.control({ reset: true });
    receiver.clear();
    const made = (await deposit('4242')).deposit;
    const [delivery] = await receiver.waitFor(1);
    // The adapter's verifier knows transfer types only; the signature still verifies for any type.
    expect(delivery?.error).toBeNull();
    expect(JSON.parse(delivery?.rawBody ?? '{}')).toMatchObject({
      type: 'deposit.confirmed',
      data: { reference: made?.id, accountId: 'acct-1', asset: 'BTC', amountMinor: '4242' },
    });
  });
});

describe("the custodian's own record of one deposit", () => {
  it('I31-INBOUND a deposit is read back by its id as the custodian recorded it; an unknown id is null', async () => {
    const made = (await deposit('5151')).deposit;
    const adapter = createCustodianAdapter({ baseUrl: simulator.url });
    expect(await adapter.depositById(made?.id ?? '')).toEqual(made);
    expect(await adapter.depositById('dep_never_received')).toBeNull();
  });

  it('I31-INBOUND a custodian that cannot be asked is no evidence: the read throws', async () => {
    // Nothing listens on the discard port: the connection is refused.
    const adapter = createCustodianAdapter({ baseUrl: 'http://127.0.0.1:9', timeoutMs: 1_000 });
    await expect(adapter.depositById('dep_any')).rejects.toThrow();
  });
});
