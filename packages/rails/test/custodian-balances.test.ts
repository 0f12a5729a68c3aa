/**
 * I13-BAL: the custodian's reported balance per asset, the observed side of balance-level
 * reconciliation for a custodian account. The simulator runs as its own process; its holdings are
 * what was funded less every completed transfer, and it misreports on request so reconciliation
 * can be shown to catch a custodian whose figure is wrong.
 */

import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type CustodianAdapter, createCustodianAdapter } from '../src/custodian/adapter.ts';
import { generateWebhookSecret } from '../src/custodian/simulator.ts';

let simulator: SimulatorProcess;
let adapter: CustodianAdapter;

beforeAll(async () => {
  simulator = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
  adapter = createCustodianAdapter({ baseUrl: simulator.url, timeoutMs: 2_000 });
});
afterAll(async () => {
  await simulator.stop();
});

it('I13-BAL the reported balance is funding less completed transfers, with its report time', async () => {
  await simulator.control({ reset: true, settlement: { outcome: 'complete', afterMs: 0 } });
  await simulator.control({ fund: { asset: 'BTC', amountMinor: '500000' } });
  const before = Date.now();
  const submitted = await adapter.submit({
    externalReference: 'op_balance_1',
    asset: 'BTC',
    amountMinor: '120000',
    destination: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq',
  });
  expect(submitted.outcome).toBe('acknowledged');
  await expect
    .poll(
      async () =>
        (await adapter.lookupByReference('op_balance_1')).found === 'one' &&
        (await simulator.ledger()).transfers[0]?.status,
    )
    .toBe('completed');
  const report = await adapter.balances();
  expect(report.data).toEqual([{ asset: 'BTC', amountMinor: '380000' }]);
  expect(Date.parse(report.asOf)).toBeGreaterThanOrEqual(before - 1_000);
});

it('I13-BAL the simulator misreports a balance on request, and stops when cleared', async () => {
  await simulator.control({ reset: true });
  await simulator.control({ fund: { asset: 'BTC', amountMinor: '1000' } });
  await simulator.control({ misreportBalance: { asset: 'BTC', deltaMinor: '-7' } });
  expect((await adapter.balances()).data).toEqual([{ asset: 'BTC', amountMinor: '993' }]);
  await simulator.control({ misreportBalance: null });
  expect((await adapter.balances()).data).toEqual([{ asset: 'BTC', amountMinor: '1000' }]);
});
