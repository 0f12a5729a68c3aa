import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAccountWithdrawals } from '../src/customer/account.ts';
import { operations } from '../src/db/schema/index.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { listOperations, operationPageQuery } from '../src/queries/list.ts';
import { encodeCursor } from '../src/queries/page-cursor.ts';
import { fund, newTenant, submit, withdrawal } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './harness.ts';

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
});
afterAll(() => t.dispose());

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
    expect(seen).toEqual([...created].reverse());
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
 * scan the table nor sort it. Sequential scans are priced out so that a plan can only avoid them
 * with an index that serves the filter and order; a Sort node left in the plan means none does.
 */
describe('I14-LIST lists stay fast as history grows', () => {
  async function plan(query: { getSQL(): ReturnType<typeof sql> }): Promise<string> {
    return t.db.transaction(async (tx) => {
      await tx.execute(sql`set local enable_seqscan = off`);
      const rows = await tx.execute(sql`explain ${query.getSQL()}`);
      const lines = (Array.isArray(rows) ? rows : (rows as { rows: unknown[] }).rows) as Record<
        string,
        string
      >[];
      return lines.map((line) => Object.values(line)[0]).join('\n');
    });
  }
  const first = { limit: 50 };
  const cases: [string, () => Parameters<typeof plan>[0]][] = [];
  const tenant = () => eq(operations.tenantId, tenantId);
  const withdrawals = () => eq(operations.kind, 'withdrawal');
  cases.push(
    ['withdrawals.list first page', () => operationPageQuery(t.db, [tenant(), withdrawals()], first)],
    [
      'withdrawals.list deep cursor',
      () => operationPageQuery(t.db, [tenant(), withdrawals()], { limit: 50, cursor: cursorAt() }),
    ],
    [
      'withdrawals.list filtered by state',
      () =>
        operationPageQuery(t.db, [tenant(), withdrawals(), eq(operations.state, 'REQUESTED')], {
          limit: 50,
          cursor: cursorAt(),
        }),
    ],
    [
      'customer history per account',
      () =>
        operationPageQuery(t.db, [tenant(), eq(operations.accountRef, 'acct-p'), withdrawals()], {
          limit: 50,
          cursor: cursorAt(),
        }),
    ],
    [
      'approval queue, oldest first',
      () =>
        operationPageQuery(t.db, [tenant(), withdrawals(), eq(operations.state, 'REQUESTED')], {
          limit: 50,
          oldestFirst: true,
          cursor: cursorAt(),
        }),
    ],
  );
  /** A position deep in the history (the cursor is made once the rows exist). */
  function cursorAt() {
    return encodeCursor('2026-11-30 12:00:00.1231+00', created[0] ?? '');
  }
  it.each(cases)(
    'I14-LIST %s: an index range in order, no sequential scan, no sort',
    async (_name, query) => {
      const text = await plan(query());
      expect(text).not.toMatch(/Seq Scan on operations/);
      expect(text).not.toMatch(/\bSort\b/);
      expect(text).toMatch(/Index (Only )?Scan/);
    },
  );
});
