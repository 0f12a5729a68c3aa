import { errorStatus } from '@idem/contracts';
import { rowsOf } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { startSilentServer } from './support/in-process.ts';
import { evmAddress, provisionTenant, type TenantFixture } from './support/provision.ts';

/** Everything a malformed request could have written, counted table by table. */
async function footprint(database: TestDatabase): Promise<string> {
  const result = await database.db.execute(sql`
    select (select count(*) from operations) as operations, (select count(*) from postings) as postings,
           (select count(*) from work_items) as work, (select count(*) from operation_transitions) as history,
           (select coalesce(sum(available), 0)::text from balances) as available`);
  return JSON.stringify(rowsOf(result));
}

describe('malformed requests (property)', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let tenant: TenantFixture;

  beforeAll(async () => {
    database = await createTestDatabase();
    tenant = await provisionTenant(database.db);
    ({ server } = await startSilentServer(database));
  });
  afterAll(async () => {
    await server?.close();
    await database?.dispose();
  });

  const valid = () => ({
    withdrawalId: 'wd-prop',
    accountId: 'cust-7',
    asset: 'ETH',
    destination: evmAddress(),
    amountMinor: '1000',
  });
  const badAmount = fc.oneof(
    fc.constantFrom('1.5', '1e18', '0', '00', '-1', '0100', ' 1', '1 ', '', '0x10', '９'),
    fc.double().map(String),
    fc.string({ minLength: 79, maxLength: 120, unit: fc.constantFrom('1', '9') }),
    fc.integer(),
  );
  const badKey = fc.oneof(
    fc.constant(''),
    fc.string({ minLength: 256, maxLength: 300, unit: 'grapheme-ascii' }),
    fc.emailAddress(),
    fc.constantFrom('has space', 'tab\tkey', 'ünïcode'),
  );
  const mutation = fc.oneof(
    badAmount.map((amountMinor) => ({
      request: { ...valid(), amountMinor },
      idempotencyKey: 'withdrawal-p1',
    })),
    badKey.map((idempotencyKey) => ({ request: valid(), idempotencyKey })),
    fc
      .string({ maxLength: 12 })
      .map((asset) => ({ request: { ...valid(), asset }, idempotencyKey: 'withdrawal-p2' })),
    fc
      .string({ maxLength: 64 })
      .map((destination) => ({ request: { ...valid(), destination }, idempotencyKey: 'withdrawal-p3' })),
    fc
      .dictionary(fc.string({ maxLength: 8 }), fc.jsonValue(), { maxKeys: 4 })
      .map((request) => ({ request })),
    fc.jsonValue(),
    fc.record({
      request: fc.constant(valid()),
      idempotencyKey: fc.constant('withdrawal-p4'),
      extra: fc.jsonValue(),
    }),
  );

  it('C03 C23 every malformed submission gets a typed 4xx and leaves the database unchanged', async () => {
    const before = await footprint(database);
    await fc.assert(
      fc.asyncProperty(mutation, async (body) => {
        const response = await fetch(`http://127.0.0.1:${server.port}/trpc/withdrawals.submit`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify(body) ?? 'null',
        });
        const json = (await response.json()) as { error?: { data?: { code?: string; status?: number } } };
        const code = json.error?.data?.code;
        expect(response.status).toBeGreaterThanOrEqual(400);
        expect(response.status).toBeLessThan(500);
        expect(code).toBeDefined();
        expect(errorStatus[code as keyof typeof errorStatus]).toBe(response.status);
        expect(response.headers.get('x-request-id')).toBeTruthy();
      }),
      { numRuns: 150 },
    );
    expect(await footprint(database)).toBe(before);
  });
});
