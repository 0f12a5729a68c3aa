import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { fund, newTenant, submit, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAccountWithdrawals } from '../src/customer/account.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { listOperations, operationListConditions, operationPageQuery } from '../src/queries/list.ts';
import { encodeCursor } from '../src/queries/page-cursor.ts';
import { approvalQueueConditions, attentionQueueQuery, searchConditions } from '../src/staff/queries.ts';

/**
 * Keyset pages over a tenant's history. PostgreSQL keeps microseconds; a cursor that keeps only
 * JavaScript's milliseconds skips (or repeats) the rows created within the millisecond of a page
 * boundary, which a busy tenant meets all the time.
 */
let t: TestDatabase;
let tenantId: string;
const created: string[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-p', 'ETH', 10_000n);
  for (let i = 0; i < 5; i += 1) {
    const { operation } = await submit(
      t.db,
      tenantId,
      withdrawal({ withdrawalId: `wd-page-${i}`, accountId: 'acct-p', amountMinor: '10' }),
      `k-page-${i}`,
    );
    created.push(operation.operationId);
  }
  // Five creations within one millisecond, 100 microseconds apart (triggers off: created_at is
  // immutable to the application, and this only stages what a busy second produces).
  await t.db.transaction(async (tx) => {
    await tx.execute(sql`set local session_replication_role = replica`);
    for (const [i, id] of created.entries()) {
      await tx.execute(
        sql`update operations set created_at = '2026-11-30 12:00:00.1231+00'::timestamptz + make_interval(secs => ${i} * 0.0001)
            where operation_id = ${id}`,
      );
    }
  });
  await stageSettledHistory();
});
afterAll(() => t.dispose());

/**
 * A tenant's history as the planner meets it in production: 20,000 settled withdrawals over two
 * weeks across 200 accounts and 2,000 deposits, beside the few in flight above, with statistics.
 * Staged by INSERT (as the superuser; only the plans are under test here), because a plan over a
 * handful of rows tells nothing: any index, or a full scan, is as cheap as another.
 */
async function stageSettledHistory() {
  await t.db.execute(sql`insert into operations (tenant_id, operation_id, kind, idempotency_key, reference,
      account_ref, asset_code, network, destination, amount_minor, policy_version, payload_hash, state,
      approvals_required, created_at, updated_at, settled_at)
    select ${tenantId}::uuid, gen_random_uuid(), 'withdrawal', 'k-hist-' || g, 'wd-hist-' || g, 'acct-h' || (g % 200),
      a.code, a.network, '0x00000000000000000000000000000000000000aa', 1000, 1, md5(g::text), 'CONFIRMED', 0,
      at, at, at
    from generate_series(1, 20000) g, assets a,
      lateral (select '2026-11-01'::timestamptz + make_interval(secs => g * 60) as at) t
    where a.tenant_id = ${tenantId}::uuid and a.code = 'ETH'`);
  await t.db.execute(sql`insert into operations (tenant_id, operation_id, kind, idempotency_key, reference,
      account_ref, asset_code, network, amount_minor, policy_version, payload_hash, state, created_at, updated_at, settled_at)
    select ${tenantId}::uuid, gen_random_uuid(), 'deposit', 'k-dep-' || g, 'dep-hist-' || g, 'acct-h' || (g % 200),
      a.code, a.network, 5000, 1, md5(g::text), 'CONFIRMED', at, at, at
    from generate_series(1, 2000) g, assets a,
      lateral (select '2026-11-01'::timestamptz + make_interval(secs => g * 600) as at) t
    where a.tenant_id = ${tenantId}::uuid and a.code = 'ETH'`);
  await t.db.execute(sql`analyze operations`);
  await t.db.execute(sql`analyze operation_transitions`);
}

async function everyPage<T extends { operationId: string }>(
  page: (cursor: string | undefined) => Promise<{ items: T[]; nextCursor: string | null }>,
): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | undefined;
  for (let guard = 0; guard < 20; guard += 1) {
    const result = await page(cursor);
    seen.push(...result.items.map((item) => item.operationId));
    if (!result.nextCursor) break;
    cursor = result.nextCursor;
  }
  return seen;
}

describe('I14-LIST keyset pages keep PostgreSQL precision', () => {
  it('I14-LIST withdrawals.list pages of 2 return each of five withdrawals created within one millisecond once', async () => {
    const seen = await everyPage((cursor) =>
      withTenant(t.db, tenantId, (tx) =>
        listOperations(tx, tenantId, { kind: 'withdrawal', limit: 2, ...(cursor ? { cursor } : {}) }),
      ),
    );
    // The five are the newest of the tenant's history (staged below, two weeks older).
    expect(seen.slice(0, created.length)).toEqual([...created].reverse());
  });

  it('I14-LIST the customer history pages the same way', async () => {
    const seen = await everyPage((cursor) =>
      withTenant(t.db, tenantId, (tx) =>
        listAccountWithdrawals(tx, tenantId, 'acct-p', { cursor, limit: 2 }),
      ),
    );
    expect(seen).toEqual([...created].reverse());
  });
});

/**
 * Every list over a tenant's history is served by an index in its own order: the plan may neither
 * scan the table nor sort it, nor filter rows an index scan walked through (a filter on the scan
 * means the index does not hold the list's condition, so a page reads every row that fails it).
 * Plans are made as the application makes them: as the restricted role under row-level security,
 * inside `withTenant`, so a policy that defeated the index would show, over a staged history of
 * 22,000 operations with fresh statistics, with the planner's own costs (nothing priced out).
 */
describe('I14-LIST lists stay fast as history grows', () => {
  async function plan(query: { getSQL(): ReturnType<typeof sql> }): Promise<string> {
    return withTenant(t.db, tenantId, async (tx) => {
      return planLines(rowsOf(await tx.execute(sql`explain ${query.getSQL()}`)));
    });
  }
  const first = { limit: 50 };
  /** A position deep in the history (the cursor is made once the rows exist). */
  const cursorAt = () => encodeCursor('2026-11-30 12:00:00.1231+00', created[0] ?? '');
  const deep = () => ({ limit: 50, cursor: cursorAt() });
  const page = (conditions: () => ReturnType<typeof operationListConditions>, options: () => object) => () =>
    operationPageQuery(t.db, conditions(), options() as { limit: number });
  const ranges: [string, () => Parameters<typeof plan>[0]][] = [
    [
      'withdrawals.list and GET /v1/withdrawals, first page',
      page(
        () => operationListConditions(tenantId, { kind: 'withdrawal' }),
        () => first,
      ),
    ],
    [
      'withdrawals.list deep cursor',
      page(() => operationListConditions(tenantId, { kind: 'withdrawal' }), deep),
    ],
    [
      'withdrawals.list filtered by state',
      page(() => operationListConditions(tenantId, { kind: 'withdrawal', state: 'REQUESTED' }), deep),
    ],
    ['deposits.list', page(() => operationListConditions(tenantId, { kind: 'deposit' }), deep)],
    [
      'deposits.list of one account',
      page(() => operationListConditions(tenantId, { kind: 'deposit', accountRef: 'acct-h7' }), deep),
    ],
    [
      'customer history per account',
      page(() => operationListConditions(tenantId, { kind: 'withdrawal', accountRef: 'acct-p' }), deep),
    ],
    [
      'staff approval queue, oldest first',
      page(
        () => approvalQueueConditions(tenantId),
        () => ({ ...deep(), oldestFirst: true }),
      ),
    ],
  ];
  it.each(ranges)(
    'I14-LIST %s: an index range in order, no sequential scan, no sort, no filter',
    async (_name, query) => {
      const text = await plan(query());
      expect(text).not.toMatch(/Seq Scan on operations/);
      expect(text).not.toMatch(/\bSort\b/);
      expect(text).toMatch(/Index (Only )?Scan/);
      // Row-level security's tenant check is a one-time filter; any other filter is rows read in vain.
      expect(text.replace(/One-Time Filter/g, '')).not.toMatch(/Filter:/);
    },
  );

  it('I14-LIST staff attention queue: only the operations in the state are read (by index), then ordered', async () => {
    for (const state of ['BROADCAST', 'UNKNOWN', 'FAILED_TERMINAL'] as const) {
      const text = await withTenant(t.db, tenantId, async (tx) => {
        return planLines(
          rowsOf(
            await tx.execute(
              sql`explain ${attentionQueueQuery(tx, tenantId, { state, limit: 50 }).getSQL()}`,
            ),
          ),
        );
      });
      expect(text).not.toMatch(/Seq Scan on operations/);
      // Bounded by what is in the state now (in flight), whichever index on state the planner takes.
      expect(text).toMatch(new RegExp(`Index Cond: .*state = '${state}'`));
    }
  });

  it('I14-LIST staff search: every alternative is an index lookup, no scan of the tenant', async () => {
    for (const term of ['wd-page-1', 'acct-p', `0x${'ab'.repeat(32)}`, created[0] ?? '']) {
      const text = await plan(operationPageQuery(t.db, searchConditions(tenantId, term), { limit: 50 }));
      expect(text).not.toMatch(/Seq Scan on operations/);
      expect(text).toMatch(/BitmapOr/);
      // A filter would mean one alternative is checked row by row over the tenant's operations.
      expect(text.replace(/One-Time Filter/g, '')).not.toMatch(/Filter:/);
    }
  });
});

/**
 * A scrape's aggregate reads only operations in flight: the function's own query, planned as the
 * role it runs as (its owner, `idem_metrics`), must take the partial index on the non-settled
 * states and never the table (the settled totals are read apart, at most once per longer interval).
 */
describe('I14-LIST the /metrics aggregate costs O(in flight), not O(history)', () => {
  it('I14-LIST idem_operation_stats() reads the partial index of in-flight states, not the history', async () => {
    const text = await t.db.transaction(async (tx) => {
      const [fn] = rowsOf<{ body: string }>(
        await tx.execute(sql`select prosrc as body from pg_proc where proname = 'idem_operation_stats'`),
      );
      await tx.execute(sql`set local role idem_metrics`);
      return planLines(rowsOf(await tx.execute(sql.raw(`explain ${fn?.body ?? ''}`))));
    });
    expect(text).not.toMatch(/Seq Scan on operations/);
    expect(text).toMatch(/Index (Only )?Scan using operations_in_flight on operations/);
  });
});

function planLines(rows: Record<string, unknown>[]): string {
  return rows.map((line) => String(Object.values(line)[0])).join('\n');
}
