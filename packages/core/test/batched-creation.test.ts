import { IdemError } from '@idem/contracts';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import {
  balanceOf,
  ETH,
  evmAddress,
  fund,
  newTenant,
  provisionRiskPolicy,
  refusal,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { APP_ROLE } from '../src/db/app-role.ts';
import { openDatabase } from '../src/db/connect.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { type ItemOutcome, MAX_BATCH_ITEMS, submitWithdrawals } from '../src/operations/batched-creation.ts';
import { submitWithdrawal } from '../src/operations/create-withdrawal.ts';
import { expectLedgerInvariants } from './ledger-invariants.ts';

/**
 * Batched creation (I17): many submissions of one tenant written by one statement,
 * `idem_create_withdrawals`, each answered exactly as the same submission made alone would be.
 */
let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase({ maxConnections: 20 });
});
afterAll(() => t.dispose());

type Answer = string;

/** An outcome as one comparable word: CREATED/REPLAYED with the state, or the refusal's code. */
function answerOf(outcome: ItemOutcome): Answer {
  if (outcome.ok) return `${outcome.claim.outcome} ${outcome.claim.operation.state}`;
  const error = outcome.error;
  if (!(error instanceof IdemError)) throw error;
  return error.details.holderKey ? `${error.code} holder=${String(error.details.holderKey)}` : error.code;
}

async function alone(tenantId: string, request: unknown, idempotencyKey: unknown): Promise<ItemOutcome> {
  try {
    return { ok: true, claim: await submitWithdrawal(t.db, { tenantId, request, idempotencyKey }) };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * Everything withdrawal creation writes for a tenant, by key (generated ids and the hashes, which
 * cover the tenant id, left out).
 */
async function storedState(tenantId: string) {
  return withTenant(t.db, tenantId, async (tx) => ({
    operations: rowsOf(
      await tx.execute(sql`select idempotency_key, reference, account_ref, amount_minor::text, state,
          rejection_code, version from operations where kind = 'withdrawal' order by idempotency_key`),
    ),
    transitions: rowsOf(
      await tx.execute(sql`select o.idempotency_key, t.seq, t.from_state, t.to_state, t.actor, t.reason
          from operation_transitions t join operations o using (tenant_id, operation_id)
          where o.kind = 'withdrawal' order by o.idempotency_key, t.seq`),
    ),
    workItems: rowsOf(
      await tx.execute(sql`select o.idempotency_key, w.topic, w.payload - 'operationId' as payload
          from work_items w join operations o using (tenant_id, operation_id)
          where o.kind = 'withdrawal' order by o.idempotency_key, w.topic, w.payload->>'version'`),
    ),
    holds: rowsOf(
      await tx.execute(sql`select o.idempotency_key, j.kind, p.posting_no, p.bucket, p.amount::text
          from journal_entries j join operations o using (tenant_id, operation_id)
          join postings p on p.tenant_id = j.tenant_id and p.entry_id = j.entry_id
          where o.kind = 'withdrawal' order by o.idempotency_key, p.posting_no`),
    ),
    balances: rowsOf(
      await tx.execute(
        sql`select account_ref, available::text, held::text from balances order by account_ref`,
      ),
    ),
  }));
}

describe('one statement for many submissions (I17)', () => {
  it('I17 answers every item as the same call alone would, and stores the same rows', async () => {
    // The same sequence, once as single calls and once as one batch, on two identical tenants.
    const destination = evmAddress();
    const item = (id: string, key: string, amountMinor: string, overrides: Record<string, unknown> = {}) => ({
      request: {
        withdrawalId: id,
        accountId: 'acct-1',
        asset: 'ETH',
        destination,
        amountMinor,
        ...overrides,
      },
      idempotencyKey: key,
    });
    const earlier = item('w-earlier', 'k-earlier', '100');
    const items = [
      item('w-1', 'k-1', '300'),
      earlier, // a replay of a key created before the batch
      item('w-earlier', 'k-earlier', '101'), // that key with another payload
      item('w-earlier', 'k-second-client', '100'), // a second key for a held withdrawal id
      item('w-2', 'k-2', String(ETH)), // more than is left: stored INSUFFICIENT_FUNDS
      item('w-3', 'k-3', '0'), // not a withdrawal amount: refused, nothing written
      item('w-4', 'k-4', '5', { asset: 'DOGE' }), // an unknown asset: refused, nothing written
      item('w-5', 'k-5', '200'),
      item('w-5', 'k-5', '200'), // the same key twice in one batch: a replay of the first
      item('w-6', 'k-6a', '50'),
      item('w-6', 'k-6b', '50'), // one withdrawal id under two keys in one batch
      item('w-7', 'k-7', '400', { accountId: 'acct-2' }),
      item('w-earlier', 'k-1', '300'), // a key held by w-1 with an id held by k-earlier: the key decides
    ];
    const setUp = async () => {
      const tenantId = await newTenant(t.db);
      await fund(t.db, tenantId, 'acct-1', 'ETH', 1_000n);
      await fund(t.db, tenantId, 'acct-2', 'ETH', 300n);
      const first = await submitWithdrawal(t.db, { tenantId, ...earlier });
      expect(first.outcome).toBe('CREATED');
      return tenantId;
    };
    const singleTenant = await setUp();
    const expected: Answer[] = [];
    for (const entry of items)
      expected.push(answerOf(await alone(singleTenant, entry.request, entry.idempotencyKey)));

    const batchTenant = await setUp();
    const answers = (await submitWithdrawals(t.db, { tenantId: batchTenant, items })).map(answerOf);

    expect(expected).toEqual([
      'CREATED REQUESTED',
      'REPLAYED REQUESTED',
      'IDEMPOTENCY_CONFLICT',
      'IDEMPOTENCY_CONFLICT holder=k-earlier',
      'CREATED REJECTED',
      'VALIDATION',
      'VALIDATION',
      'CREATED REQUESTED',
      'REPLAYED REQUESTED',
      'CREATED REQUESTED',
      'IDEMPOTENCY_CONFLICT holder=k-6a',
      'CREATED REJECTED',
      'IDEMPOTENCY_CONFLICT',
    ]);
    expect(answers).toEqual(expected);
    expect(await storedState(batchTenant)).toEqual(await storedState(singleTenant));
    await expectLedgerInvariants(t.db, batchTenant);
  });

  it(`I17 refuses more than ${MAX_BATCH_ITEMS} items with VALIDATION and writes nothing`, async () => {
    const tenantId = await newTenant(t.db);
    await fund(t.db, tenantId, 'acct-1', 'ETH', ETH);
    const items = Array.from({ length: MAX_BATCH_ITEMS + 1 }, () => {
      const request = withdrawal({ amountMinor: '1' });
      return { request, idempotencyKey: `withdrawal-${request.withdrawalId}` };
    });
    expect((await refusal(submitWithdrawals(t.db, { tenantId, items }))).code).toBe('VALIDATION');
    expect(await balanceOf(t.db, tenantId, 'acct-1')).toEqual({ available: ETH, held: 0n });
  });

  it('I17 the batch statement answers every item itself, so no answer depends on the retry alone', async () => {
    // createPrepared sends an item again alone when its row is NULL; a statement that returned NULL
    // for replays or rejections would still give right answers above. Here the rows are read raw.
    const tenantId = await newTenant(t.db);
    await fund(t.db, tenantId, 'acct-1', 'ETH', 1_500n);
    const item = (n: number, key: string, reference: string, amount: number, policyVersion = 1) => ({
      item: n,
      operation_id: crypto.randomUUID(),
      idempotency_key: key,
      reference,
      account_ref: 'acct-1',
      asset_code: 'ETH',
      network: 'ethereum',
      destination: evmAddress(),
      memo: null,
      amount_minor: String(amount),
      fee_cap_minor: null,
      policy_version: policyVersion,
      payload_hash: 'ab'.repeat(32),
    });
    const items = [
      item(0, 'k-a', 'w-a', 1_000), // created, held
      item(1, 'k-b', 'w-b', 1_000), // created, then REJECTED: 500 left
      item(2, 'k-a', 'w-c', 1), // the key of item 0: answered by its holder
      item(3, 'k-d', 'w-a', 1), // the withdrawal id of item 0: answered by its holder
      item(4, 'k-e', 'w-e', 1, 99), // a stale policy version: NULLs, written alone by the caller
    ];
    const rows = rowsOf<{
      idempotency_key: string | null;
      state: string | null;
      rejection_code: string | null;
    }>(
      await t.db.execute(
        sql`select idempotency_key, state, rejection_code from idem_create_withdrawals(${tenantId}::uuid, ${JSON.stringify(items)}::jsonb, 'test')`,
      ),
    );
    expect(rows).toEqual([
      { idempotency_key: 'k-a', state: 'REQUESTED', rejection_code: null },
      { idempotency_key: 'k-b', state: 'REJECTED', rejection_code: 'INSUFFICIENT_FUNDS' },
      { idempotency_key: 'k-a', state: 'REQUESTED', rejection_code: null },
      { idempotency_key: 'k-a', state: 'REQUESTED', rejection_code: null },
      { idempotency_key: null, state: null, rejection_code: null },
    ]);
    expect(await balanceOf(t.db, tenantId, 'acct-1')).toEqual({ available: 500n, held: 1_000n });
    await expectLedgerInvariants(t.db, tenantId);
  });

  it('I17 an item hashed with a stale policy version is written alone with the current one', async () => {
    const tenantId = await newTenant(t.db);
    await fund(t.db, tenantId, 'acct-1', 'ETH', ETH);
    // Fill the process's copy of the context, then move the version under it.
    await submitWithdrawal(t.db, { tenantId, request: withdrawal(), idempotencyKey: 'k-warm' });
    await provisionRiskPolicy(t.db, {
      tenantId,
      assetCode: 'ETH',
      autoApproveMaxMinor: '1',
      fourEyesMinMinor: '2',
      actor: 'test',
    });
    const items = [withdrawal(), withdrawal()].map((request) => ({
      request,
      idempotencyKey: request.withdrawalId,
    }));
    const outcomes = await submitWithdrawals(t.db, { tenantId, items });
    expect(outcomes.map(answerOf)).toEqual(['CREATED REQUESTED', 'CREATED REQUESTED']);
    for (const outcome of outcomes) expect(outcome.ok && outcome.claim.operation.policyVersion).toBe(2);
  });

  it('I17 C08 one batch of 50 withdrawals of 0.8 against a balance of 1.0 places exactly one hold', async () => {
    const tenantId = await newTenant(t.db);
    await fund(t.db, tenantId, 'acct-race', 'ETH', ETH);
    const amountMinor = ((ETH * 8n) / 10n).toString();
    const items = Array.from({ length: 50 }, (_, i) => ({
      request: withdrawal({ accountId: 'acct-race', amountMinor }),
      idempotencyKey: `race-${i}`,
    }));
    const answers = (await submitWithdrawals(t.db, { tenantId, items })).map(answerOf);
    expect(answers.filter((a) => a === 'CREATED REQUESTED')).toHaveLength(1);
    expect(answers.filter((a) => a === 'CREATED REJECTED')).toHaveLength(49);
    expect(await balanceOf(t.db, tenantId, 'acct-race')).toEqual({
      available: ETH / 5n,
      held: (ETH * 8n) / 10n,
    });
    await expectLedgerInvariants(t.db, tenantId);
  });

  it('I17 C08 50 concurrent gathered submissions of 0.8 against 1.0 place exactly one hold, in fewer statements than calls', async () => {
    const tenantId = await newTenant(t.db);
    await fund(t.db, tenantId, 'acct-race', 'ETH', ETH);
    const amountMinor = ((ETH * 8n) / 10n).toString();
    // A pool of 2 and one batch at a time: the other submissions must gather behind it.
    const handle = t.url
      ? await openDatabase({ url: t.url, maxConnections: 2, batching: { concurrency: 1, gatherFrom: 1 } })
      : null;
    const db = handle?.db ?? t.db;
    try {
      const settled = await Promise.allSettled(
        Array.from({ length: 50 }, (_, i) =>
          submitWithdrawal(db, {
            tenantId,
            request: withdrawal({ accountId: 'acct-race', amountMinor }),
            idempotencyKey: `gathered-${i}`,
          }),
        ),
      );
      const states = settled.map((s) =>
        s.status === 'fulfilled' ? s.value.operation.state : String(s.reason),
      );
      expect(states.filter((s) => s === 'REQUESTED')).toHaveLength(1);
      expect(states.filter((s) => s === 'REJECTED')).toHaveLength(49);
      // 50 withdrawals written by fewer transactions than calls: they were gathered.
      expect(await writingTransactions(tenantId)).toBeLessThan(50);
    } finally {
      await handle?.close();
    }
    expect(await balanceOf(t.db, tenantId, 'acct-race')).toEqual({
      available: ETH / 5n,
      held: (ETH * 8n) / 10n,
    });
    await expectLedgerInvariants(t.db, tenantId);
  });

  it('I17 C03 C08 100 items of one key across concurrent batches make one operation and one hold; the rest replay', async () => {
    const tenantId = await newTenant(t.db);
    await fund(t.db, tenantId, 'acct-storm', 'ETH', ETH);
    const request = withdrawal({ accountId: 'acct-storm', amountMinor: '1000' });
    const key = `withdrawal-${request.withdrawalId}`;
    // Ten batches of ten, all of one key, racing each other on the pool's connections.
    const outcomes = (
      await Promise.all(
        Array.from({ length: 10 }, () =>
          submitWithdrawals(t.db, {
            tenantId,
            items: Array.from({ length: 10 }, () => ({ request, idempotencyKey: key })),
          }),
        ),
      )
    ).flat();
    const answers = outcomes.map(answerOf);
    expect(answers.filter((a) => a === 'CREATED REQUESTED')).toHaveLength(1);
    expect(answers.filter((a) => a === 'REPLAYED REQUESTED')).toHaveLength(99);
    expect(new Set(outcomes.map((o) => o.ok && o.claim.operation.operationId)).size).toBe(1);
    expect(await balanceOf(t.db, tenantId, 'acct-storm')).toEqual({ available: ETH - 1000n, held: 1000n });
  });

  it.skipIf(!onPostgres)(
    'I17 concurrent batches over the same accounts in any item order never deadlock',
    async () => {
      const tenantId = await newTenant(t.db);
      const accounts = ['acct-a', 'acct-b', 'acct-c', 'acct-d'];
      for (const account of accounts) await fund(t.db, tenantId, account, 'ETH', ETH);
      const before = await deadlocks();
      // Each batch touches every account, in its own order: holds taken in item order would cross.
      const outcomes = (
        await Promise.all(
          Array.from({ length: 12 }, (_, batch) =>
            submitWithdrawals(t.db, {
              tenantId,
              items: Array.from({ length: 16 }, (_, i) => {
                const request = withdrawal({
                  accountId: accounts[(batch + i * (batch % 2 ? 3 : 1)) % 4],
                  amountMinor: '7',
                });
                return { request, idempotencyKey: `b${batch}-${i}` };
              }),
            }),
          ),
        )
      ).flat();
      expect(outcomes.map(answerOf).every((a) => a === 'CREATED REQUESTED')).toBe(true);
      expect(await deadlocks()).toBe(before);
      await expectLedgerInvariants(t.db, tenantId);
    },
  );

  it.skipIf(!onPostgres)(
    'I17 a batch the database aborts as a deadlock victim is sent again item by item, and every item is answered',
    async () => {
      const tenantId = await newTenant(t.db);
      await fund(t.db, tenantId, 'acct-1', 'ETH', ETH);
      const destination = evmAddress();
      const request = (withdrawalId: string) => ({
        withdrawalId,
        accountId: 'acct-1',
        asset: 'ETH',
        destination,
        amountMinor: '5',
      });
      // Another transaction takes withdrawal id "y" and, once the batch waits on it, id "x", which the
      // batch claimed first: a cycle on the unique index of (tenant, kind, reference). That other
      // transaction waits 10 s before looking for deadlocks, so the batch is the one PostgreSQL aborts.
      const other = postgres(t.url ?? '', { max: 1, onnotice: () => {} });
      const before = await deadlocks();
      let batch: Promise<ItemOutcome[]> | undefined;
      try {
        await other.begin(async (tx) => {
          await tx`set local deadlock_timeout = '10s'`;
          await tx`select set_config('app.tenant_id', ${tenantId}, true), set_config('role', ${APP_ROLE}, true)`;
          const claim = (key: string, reference: string) => tx`
          insert into operations (tenant_id, operation_id, kind, idempotency_key, reference, account_ref, asset_code,
                                  network, destination, amount_minor, policy_version, payload_hash, state)
          values (${tenantId}, gen_random_uuid(), 'withdrawal', ${key}, ${reference}, 'acct-1', 'ETH', 'ethereum',
                  ${destination}, 5, 1, 'other', 'REQUESTED')`;
          await claim('other-y', 'y');
          batch = submitWithdrawals(t.db, {
            tenantId,
            items: [
              { request: request('x'), idempotencyKey: 'a-x' },
              { request: request('y'), idempotencyKey: 'b-y' },
            ],
          });
          await waitForLockWait('idem_create_withdrawals');
          await claim('other-x', 'x');
        });
      } finally {
        await other.end();
      }
      const answers = ((await batch) ?? []).map(answerOf);
      // The victim's backend reports its statistics a moment after it aborts.
      await expect.poll(deadlocks, { timeout: 10_000, interval: 100 }).toBe(before + 1);
      expect(answers).toEqual(['IDEMPOTENCY_CONFLICT holder=other-x', 'IDEMPOTENCY_CONFLICT holder=other-y']);
      expect(await balanceOf(t.db, tenantId, 'acct-1')).toEqual({ available: ETH, held: 0n });
    },
  );
});

/** How many transactions wrote a tenant's withdrawals: rows one statement wrote share its xmin. */
async function writingTransactions(tenantId: string): Promise<number> {
  const [row] = rowsOf<{ n: number }>(
    await t.db.execute(
      sql`select count(distinct xmin::text)::int as n from operations where tenant_id = ${tenantId} and kind = 'withdrawal'`,
    ),
  );
  return row?.n ?? 0;
}

async function deadlocks(): Promise<number> {
  const [row] = rowsOf<{ n: number }>(
    await t.db.execute(
      sql`select deadlocks::int as n from pg_stat_database where datname = current_database()`,
    ),
  );
  return row?.n ?? 0;
}

async function waitForLockWait(query: string): Promise<void> {
  const client = postgres(t.url ?? '', { max: 1, onnotice: () => {} });
  try {
    await vi.waitFor(
      async () => {
        const [row] = await client`select count(*)::int as n from pg_stat_activity
          where query like ${`%${query}%`} and wait_event_type = 'Lock' and pid <> pg_backend_pid()`;
        if ((row?.n ?? 0) === 0) throw new Error(`no statement running ${query} waited on a lock`);
      },
      { timeout: 20_000, interval: 25 },
    );
  } finally {
    await client.end();
  }
}
