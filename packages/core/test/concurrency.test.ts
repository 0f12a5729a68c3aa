import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { balanceOf, ETH, fund, newTenant, submit, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations } from '../src/db/schema/index.ts';

/**
 * Concurrency evidence runs on real PostgreSQL with many real connections (the pool below), so
 * the races are decided by the database, not by a single-threaded client. On PGlite (no server
 * configured) the same assertions run, serialised by PGlite's single connection.
 */
let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase({ maxConnections: 20 });
  tenantId = await newTenant(t.db);
  if (onPostgres) expect(t.kind).toBe('postgres');
});
afterAll(() => t.dispose());

describe('balances under concurrency', () => {
  it('C08 50 concurrent withdrawals of 0.8 against a balance of 1.0 place exactly one hold', async () => {
    const account = 'acct-race';
    await fund(t.db, tenantId, account, 'ETH', ETH);
    const amount = ((ETH * 8n) / 10n).toString();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        submit(t.db, tenantId, withdrawal({ accountId: account, amountMinor: amount }), `race-${i}`),
      ),
    );
    const held = results.filter((r) => r.operation.state === 'REQUESTED');
    const rejected = results.filter((r) => r.operation.state === 'REJECTED');
    expect(held).toHaveLength(1);
    expect(rejected).toHaveLength(49);
    expect(rejected.every((r) => r.operation.rejectionCode === 'INSUFFICIENT_FUNDS')).toBe(true);
    expect(await balanceOf(t.db, tenantId, account)).toEqual({ available: ETH / 5n, held: (ETH * 8n) / 10n });
  });

  it('C08 100 concurrent submissions of one key create one operation and one hold; the rest replay', async () => {
    const account = 'acct-storm';
    await fund(t.db, tenantId, account, 'ETH', ETH);
    const request = withdrawal({ accountId: account, amountMinor: '1000' });
    const key = `withdrawal-${request.withdrawalId}`;
    const settled = await Promise.allSettled(
      Array.from({ length: 100 }, () => submit(t.db, tenantId, request, key)),
    );
    const outcomes = settled.map((s) =>
      s.status === 'fulfilled' ? s.value.outcome : `error:${String(s.reason)}`,
    );
    expect(outcomes.filter((o) => o === 'CREATED')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'REPLAYED')).toHaveLength(99);
    const ids = new Set(
      settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value.operation.operationId] : [])),
    );
    expect(ids.size).toBe(1);
    const count = await t.db
      .select({ n: sql<number>`count(*)::int` })
      .from(operations)
      .where(sql`tenant_id = ${tenantId} and reference = ${request.withdrawalId}`);
    expect(count[0]?.n).toBe(1);
    expect(await balanceOf(t.db, tenantId, account)).toEqual({ available: ETH - 1000n, held: 1000n });
  });

  it('C04 concurrent second keys for one withdrawal id: one wins, every other is refused naming it', async () => {
    const account = 'acct-two-clients';
    await fund(t.db, tenantId, account, 'ETH', ETH);
    const request = withdrawal({ accountId: account, amountMinor: '1000' });
    const settled = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) => submit(t.db, tenantId, request, `client-${i}`)),
    );
    const winners = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    expect(winners).toHaveLength(1);
    const holder = winners[0]?.operation.idempotencyKey;
    for (const s of settled) {
      if (s.status === 'rejected') {
        expect(s.reason.code).toBe('IDEMPOTENCY_CONFLICT');
        expect(s.reason.details.holderKey).toBe(holder);
      }
    }
    expect(await balanceOf(t.db, tenantId, account)).toEqual({ available: ETH - 1000n, held: 1000n });
  });
});
