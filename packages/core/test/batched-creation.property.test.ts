import { IdemError } from '@idem/contracts';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { fund, newTenant } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/db/connect.ts';
import { rowsOf } from '../src/db/rows.ts';
import { type ItemOutcome, submitWithdrawals } from '../src/operations/batched-creation.ts';
import { submitWithdrawal } from '../src/operations/create-withdrawal.ts';
import { expectLedgerInvariants } from './ledger-invariants.ts';

/**
 * Random interleavings of bulk batches and gathered single calls: replays, changed
 * payloads, second keys for held withdrawal ids and insufficient funds, all at once. After every
 * step the journal's invariants hold, every key is at most one operation, and every answer agrees
 * with what the database stored for that key.
 */
let t: TestDatabase;
let gathered: { db: TestDatabase['db']; close(): Promise<void> } | null = null;

beforeAll(async () => {
  t = await createTestDatabase({ maxConnections: 8 });
  // A small pool and one batch at a time, so single calls really gather (PGlite has one connection).
  gathered = t.url
    ? await openDatabase({ url: t.url, maxConnections: 3, batching: { concurrency: 1, gatherFrom: 1 } })
    : null;
});
afterAll(async () => {
  await gathered?.close();
  await t.dispose();
});

const ACCOUNTS = ['a1', 'a2'];
const DESTINATIONS = [
  '0x52908400098527886E0F7030069857D2E4169EE7',
  '0x8617E340B3D01FA5F11F306F4090FD50E238070D',
];

interface Call {
  key: number;
  ref: number;
  account: number;
  amount: number;
  destination: number;
}
type Step =
  | { kind: 'burst'; batches: Call[][]; singles: Call[] }
  | { kind: 'deposit'; account: number; amount: number };

const callArb: fc.Arbitrary<Call> = fc.record({
  key: fc.integer({ min: 0, max: 7 }),
  ref: fc.integer({ min: 0, max: 7 }),
  account: fc.integer({ min: 0, max: 1 }),
  amount: fc.integer({ min: 1, max: 300 }),
  destination: fc.integer({ min: 0, max: 1 }),
});
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('burst' as const),
      batches: fc.array(fc.array(callArb, { minLength: 1, maxLength: 6 }), { maxLength: 3 }),
      singles: fc.array(callArb, { maxLength: 6 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('deposit' as const),
      account: fc.integer({ min: 0, max: 1 }),
      amount: fc.integer({ min: 1, max: 500 }),
    }),
  },
);

const requestOf = (call: Call) => ({
  withdrawalId: `ref-${call.ref}`,
  accountId: ACCOUNTS[call.account] ?? 'a1',
  asset: 'ETH',
  destination: DESTINATIONS[call.destination] ?? '',
  amountMinor: String(call.amount),
});

describe('batched creation properties', () => {
  it('I17 random interleavings of batches and single calls keep the journal, the keys and the answers consistent', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 8 }), async (steps) => {
        const tenantId = await newTenant(t.db);
        const db = gathered?.db ?? t.db;
        for (const step of steps) {
          if (step.kind === 'deposit') {
            await fund(t.db, tenantId, ACCOUNTS[step.account] ?? 'a1', 'ETH', BigInt(step.amount));
            continue;
          }
          const answered: { call: Call; outcome: ItemOutcome }[] = [];
          await Promise.all([
            ...step.batches.map(async (batch) => {
              const outcomes = await submitWithdrawals(db, {
                tenantId,
                items: batch.map((call) => ({ request: requestOf(call), idempotencyKey: `key-${call.key}` })),
              });
              for (const [index, outcome] of outcomes.entries()) {
                answered.push({ call: batch[index] as Call, outcome });
              }
            }),
            ...step.singles.map(async (call) => {
              try {
                const claim = await submitWithdrawal(db, {
                  tenantId,
                  request: requestOf(call),
                  idempotencyKey: `key-${call.key}`,
                });
                answered.push({ call, outcome: { ok: true, claim } });
              } catch (error) {
                answered.push({ call, outcome: { ok: false, error } });
              }
            }),
          ]);
          await expectLedgerInvariants(t.db, tenantId);
          await expectAnswersStored(tenantId, answered);
        }
      }),
      { numRuns: 20 },
    );
  });
});

async function expectAnswersStored(tenantId: string, answered: { call: Call; outcome: ItemOutcome }[]) {
  const stored = rowsOf<{
    idempotency_key: string;
    reference: string;
    amount_minor: string;
    account_ref: string;
    destination: string;
  }>(
    await t.db.execute(sql`select idempotency_key, reference, amount_minor::text, account_ref, destination from operations
      where tenant_id = ${tenantId} and kind = 'withdrawal'`),
  );
  const byKey = new Map(stored.map((row) => [row.idempotency_key, row]));
  const byRef = new Map(stored.map((row) => [row.reference, row]));
  // One operation per key and per withdrawal id (the unique constraints, seen from outside).
  expect(byKey.size).toBe(stored.length);
  expect(byRef.size).toBe(stored.length);
  for (const { call, outcome } of answered) {
    const key = `key-${call.key}`;
    if (outcome.ok) {
      // CREATED or REPLAYED: the key holds this very withdrawal, as submitted.
      const row = byKey.get(key);
      expect(row?.reference).toBe(`ref-${call.ref}`);
      expect(row?.amount_minor).toBe(String(call.amount));
      expect(outcome.claim.operation.idempotencyKey).toBe(key);
      continue;
    }
    const error = outcome.error;
    expect(error).toBeInstanceOf(IdemError);
    const code = (error as IdemError).code;
    expect(['IDEMPOTENCY_CONFLICT', 'IN_FLIGHT']).toContain(code);
    const holderKey = (error as IdemError).details.holderKey;
    if (holderKey !== undefined) {
      // A second key for a held withdrawal id: the named key holds that id.
      expect(byRef.get(`ref-${call.ref}`)?.idempotency_key).toBe(holderKey);
      expect(holderKey).not.toBe(key);
    } else {
      // The key holds another payload.
      const row = byKey.get(key);
      expect(row).toBeDefined();
      expect(
        row?.reference === `ref-${call.ref}` &&
          row.amount_minor === String(call.amount) &&
          row.account_ref === ACCOUNTS[call.account] &&
          row.destination === DESTINATIONS[call.destination],
      ).toBe(false);
    }
  }
}
