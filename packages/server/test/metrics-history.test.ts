import { createTenant, creditAsOperator, submitWithdrawal } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../src/metrics.ts';

/**
 * A scrape's cost follows the work in flight, not the history: the in-flight states are
 * read on every scrape past `cacheMs`; the settled states' totals, which grow with the history, at
 * most once per `settledCacheMs`, and then behind the scrapes.
 */
let t: TestDatabase;
let tenantId: string;
let deposits = 0;

beforeAll(async () => {
  t = await createTestDatabase({ maxConnections: 4 });
  ({ tenantId } = await createTenant(t.db, { name: 'metrics history' }));
  await deposit();
});
afterAll(() => t.dispose());

async function deposit() {
  deposits += 1;
  const reference = `metrics-dep-${deposits}`;
  await creditAsOperator(t.db, {
    tenantId,
    deposit: { reference, accountId: 'acct-m', asset: 'ETH', amountMinor: '1000000' },
    idempotencyKey: `deposit-${reference}`,
    actor: 'test',
  });
}

async function withdraw(n: number) {
  await submitWithdrawal(t.db, {
    tenantId,
    request: {
      withdrawalId: `metrics-wd-${n}`,
      accountId: 'acct-m',
      asset: 'ETH',
      destination: '0x00000000000000000000000000000000000000aa',
      amountMinor: '10',
    },
    idempotencyKey: `metrics-wd-${n}`,
  });
}

async function gauge(metrics: ReturnType<typeof createMetrics>, state: string): Promise<number> {
  const text = await metrics.registry.metrics();
  return Number(new RegExp(`^idem_operations\\{state="${state}"\\} (\\d+)$`, 'm').exec(text)?.[1]);
}

describe('I14-LIST /metrics at a long history', () => {
  it('I14-LIST in-flight states are fresh on every scrape; settled totals are kept for settledCacheMs', async () => {
    const metrics = createMetrics(t.db, { cacheMs: 0, settledCacheMs: 600_000 });
    const confirmed = await gauge(metrics, 'CONFIRMED');
    expect(confirmed).toBe(deposits);
    const requested = await gauge(metrics, 'REQUESTED');

    await deposit();
    await withdraw(1);
    expect(await gauge(metrics, 'REQUESTED')).toBe(requested + 1);
    // The new settled deposit is not read again within the interval: no scan of the history.
    expect(await gauge(metrics, 'CONFIRMED')).toBe(confirmed);
  });

  it('I14-LIST past settledCacheMs the settled totals are read again, behind the scrapes', async () => {
    const metrics = createMetrics(t.db, { cacheMs: 0, settledCacheMs: 0 });
    const before = await gauge(metrics, 'CONFIRMED');
    await deposit();
    await expect.poll(() => gauge(metrics, 'CONFIRMED'), { timeout: 5_000, interval: 50 }).toBe(before + 1);
  });
});

describe('I17 /metrics shows how withdrawal submissions were gathered', () => {
  it('I17 every gathered submission is counted once in the batch-size histogram, and each batch once in its time', async () => {
    const metrics = createMetrics(t.db, { cacheMs: 0 });
    // Six at once: the first ones go alone, the rest gather behind them (the default settings).
    await Promise.all([101, 102, 103, 104, 105, 106].map((n) => withdraw(n)));
    const text = await metrics.registry.metrics();
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    expect(value('idem_withdrawal_batch_items_sum')).toBe(6);
    const batches = value('idem_withdrawal_batch_items_count');
    expect(batches).toBeGreaterThanOrEqual(1);
    expect(batches).toBeLessThanOrEqual(6);
    expect(value('idem_withdrawal_batch_seconds_count')).toBe(batches);
    expect(value('idem_withdrawal_batch_seconds_sum')).toBeGreaterThan(0);
  });
});
