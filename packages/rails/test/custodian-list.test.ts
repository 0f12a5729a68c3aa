/**
 * Missed-event recovery: reading the custodian's whole account never stops silently. `listTransfers` follows the
 * provider's cursor to the last page, and fails loudly when it cannot prove it read everything
 * (too many transfers, or a provider that pages without a cursor). Over real HTTP: the simulator in
 * its own process, and a misbehaving provider served here.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CustodianListIncompleteError, createCustodianAdapter } from '../src/custodian/adapter.ts';
import type { CustodianTransfer } from '../src/custodian/protocol.ts';
import { generateWebhookSecret } from '../src/custodian/simulator.ts';

const now = new Date().toISOString();
const transfer = (n: number): CustodianTransfer => ({
  id: `trf_${n}`,
  externalReference: `ref-${n}`,
  asset: 'BTC',
  amountMinor: String(1000 + n),
  destination: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq',
  status: 'completed',
  createdAt: now,
  updatedAt: now,
});

let simulator: SimulatorProcess;
let cursorless: Server;
let cursorlessUrl: string;

beforeAll(async () => {
  simulator = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
  await simulator.seed(Array.from({ length: 12_345 }, (_, n) => transfer(n)));
  // A provider that answers every page full and never says whether there is more.
  cursorless = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ data: Array.from({ length: 100 }, (_, n) => transfer(n)) }));
  });
  await new Promise<void>((resolve) => cursorless.listen(0, '127.0.0.1', resolve));
  cursorlessUrl = `http://127.0.0.1:${(cursorless.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await simulator?.stop();
  await new Promise((resolve) => cursorless?.close(resolve));
});

describe('I13-BRK listTransfers reads the whole account or fails loudly', () => {
  it('I13-BRK C21 follows the cursor past 10,000 transfers: each exactly once, in order', async () => {
    const listed = await createCustodianAdapter({ baseUrl: simulator.url }).listTransfers();
    expect(listed).toHaveLength(12_345);
    expect(new Set(listed.map((t) => t.id)).size).toBe(12_345);
    expect(listed.at(-1)?.id).toBe('trf_12344');
  });

  it('I13-BRK C21 more transfers than the limit is an error, not a part of the books', async () => {
    await expect(
      createCustodianAdapter({ baseUrl: simulator.url }).listTransfers({ max: 5_000 }),
    ).rejects.toBeInstanceOf(CustodianListIncompleteError);
  });

  it('I13-BRK C21 a provider that pages without a cursor fails loudly', async () => {
    await expect(createCustodianAdapter({ baseUrl: cursorlessUrl }).listTransfers()).rejects.toThrow(
      /without a cursor/,
    );
  });
});
