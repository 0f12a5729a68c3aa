import { randomUUID } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { balanceOf, ETH, fund, newTenant, strandWithdrawal, submit, withdrawal } from '@idem/testing/tenants';
import { type SQL, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../src/db/tenant-scope.ts';
import type { Operation } from '../src/operations/operation-record.ts';
import { computeOverview, overviewStatements } from '../src/queries/overview.ts';
import {
  explorerPageQuery,
  exploreWithdrawals,
  exportWithdrawals,
} from '../src/queries/withdrawal-explorer.ts';
import { openBreak } from '../src/reconciliation/breaks.ts';
import { transition } from '../src/state-machine/transition.ts';

/**
 * The operator's Overview and Withdrawals explorer (the staff console): figures computed in SQL from the
 * tenant's own rows, checked against what the test seeded, and every statement served by an index
 * (no sequential scan or sort of the tenant's history).
 */
let t: TestDatabase;
let tenantId: string;
let otherTenant: string;
const ops: Record<string, Operation> = {};
const destination = '0x1111111111111111111111111111111111111111';

async function create(name: string, amountMinor: bigint, extra: Record<string, string> = {}) {
  const { operation } = await submit(
    t.db,
    tenantId,
    withdrawal({
      withdrawalId: `wd-${name}`,
      accountId: 'acct-o',
      amountMinor: amountMinor.toString(),
      ...extra,
    }),
    `k-${name}`,
  );
  ops[name] = operation;
  return operation;
}

/** Moves created_at (and the history rows) back in time: triggers off, staging only. */
async function age(operationId: string, hoursAgo: number) {
  await t.db.transaction(async (tx) => {
    await tx.execute(sql`set local session_replication_role = replica`);
    await tx.execute(
      sql`update operations set created_at = now() - make_interval(hours => ${hoursAgo})
          where operation_id = ${operationId}`,
    );
  });
}

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  otherTenant = await newTenant(t.db, 'Other Exchange');
  await fund(t.db, tenantId, 'acct-o', 'ETH', 100n * ETH);
  await fund(t.db, otherTenant, 'acct-o', 'ETH', 100n * ETH);
  // Another tenant's withdrawal must never show.
  await submit(t.db, otherTenant, withdrawal({ accountId: 'acct-o', destination }), 'k-other');

  await create('req-old', 1n * ETH);
  await create('req-new', 2n * ETH, { destination });
  const unknown = await create('unknown', 3n * ETH);
  const broadcast = await create('broadcast', 4n * ETH);
  const confirmed = await create('confirmed', 5n * ETH, { destination });
  await withTenant(t.db, tenantId, async (tx) => {
    ops.unknown = await strandWithdrawal(tx, unknown, 'UNKNOWN');
    ops.broadcast = await strandWithdrawal(tx, broadcast, 'BROADCAST', { txHash: '0xb1' });
    const sent = await strandWithdrawal(tx, confirmed, 'BROADCAST', { txHash: '0xc1' });
    ops.confirmed = await transition(tx, sent, 'CONFIRMED', { actor: 'w', reason: 'mined' });
    await openBreak(tx, {
      tenantId,
      breakClass: 'timing',
      subject: 'chain:ethereum:test',
      details: { reason: 'staged' },
    });
    await tx.execute(
      sql`insert into work_items (tenant_id, work_id, topic, payload, status, attempts)
          values (${tenantId}, ${randomUUID()}, 'test', '{}'::jsonb, 'dead', 8)`,
    );
  });
  await age(ops['req-old']?.operationId ?? '', 5);
  await age(ops.confirmed?.operationId ?? '', 2);
});
afterAll(() => t.dispose());

describe('I14-OVERVIEW figures', () => {
  it('I14-OVERVIEW counts open withdrawals by state, held amounts, oldest per queue, breaks and dead letters from the tenant’s rows only', async () => {
    const overview = await withTenant(t.db, tenantId, (tx) => computeOverview(tx, tenantId));
    const count = (state: string) => overview.openByState.find((row) => row.state === state)?.count ?? 0;
    expect(count('REQUESTED')).toBe(2);
    expect(count('UNKNOWN')).toBe(1);
    expect(count('BROADCAST')).toBe(1);
    expect(overview.openByState.some((row) => row.state === 'CONFIRMED')).toBe(false);

    // Held per asset equals the ledger's holds (requested, unknown, broadcast: 1 + 2 + 3 + 4 ETH).
    const held = await balanceOf(t.db, tenantId, 'acct-o');
    expect(overview.held).toEqual([{ asset: 'ETH', heldMinor: held.held.toString(), withdrawals: 4 }]);
    expect(held.held).toBe(10n * ETH);

    const oldest = Object.fromEntries(overview.oldest.map((row) => [row.queue, row]));
    expect(oldest.AWAITING_APPROVAL?.reference).toBe('wd-req-old');
    expect(oldest.AWAITING_APPROVAL?.ageSeconds).toBeGreaterThanOrEqual(5 * 3600 - 5);
    expect(oldest.UNKNOWN?.operationId).toBe(ops.unknown?.operationId);
    expect(oldest.BROADCAST?.reference).toBe('wd-broadcast');

    expect(overview.openBreaks).toBe(1);
    expect(overview.deadLettered).toEqual({ workItems: 1, deliveries: 0 });

    // 5 withdrawals created within 24 h, one of them 5 h ago, one 2 h ago.
    const created = overview.hourly.reduce((sum, row) => sum + row.count, 0);
    expect(created).toBe(5);
    expect(overview.hourly.find((row) => row.state === 'CONFIRMED')?.count).toBe(1);

    // Confirmed 2 h after it was created (its created_at was moved back 2 h).
    expect(overview.latency.confirmed).toBe(1);
    expect(overview.latency.p50Seconds).toBeGreaterThanOrEqual(2 * 3600 - 5);
    expect(overview.latency.p50Seconds).toBeLessThan(2 * 3600 + 600);
    expect(overview.latency.hourly).toHaveLength(1);

    // Pending outflow: approved and not settled (unknown 3 + broadcast 4 ETH); no run observed the chain.
    const eth = overview.hotWallets.find((row) => row.asset === 'ETH');
    expect(eth?.pendingOutflowMinor).toBe((7n * ETH).toString());
    expect(eth?.observedMinor).toBeNull();
  });
});

describe('I14-EXPLORER filters, sorts and pages', () => {
  async function every(filter: Parameters<typeof exploreWithdrawals>[2], limit = 2) {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let guard = 0; guard < 20; guard += 1) {
      const page = await withTenant(t.db, tenantId, (tx) =>
        exploreWithdrawals(tx, tenantId, { ...filter, limit, ...(cursor ? { cursor } : {}) }),
      );
      seen.push(...page.items.map((item) => item.reference));
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    return seen;
  }

  it('I14-EXPLORER newest first by default, every withdrawal once across cursor pages', async () => {
    const seen = await every({});
    expect(seen).toHaveLength(5);
    expect(new Set(seen).size).toBe(5);
    expect(seen.at(-1)).toBe('wd-req-old');
  });

  it('I14-EXPLORER sorts by amount both ways across pages', async () => {
    expect(await every({ sort: 'amount_desc' })).toEqual([
      'wd-confirmed',
      'wd-broadcast',
      'wd-unknown',
      'wd-req-new',
      'wd-req-old',
    ]);
    expect(await every({ sort: 'amount_asc' }, 3)).toEqual([
      'wd-req-old',
      'wd-req-new',
      'wd-unknown',
      'wd-broadcast',
      'wd-confirmed',
    ]);
  });

  it('I14-EXPLORER filters by state, asset, account, exact destination, amount range and date range', async () => {
    expect(await every({ state: 'REQUESTED' })).toEqual(['wd-req-new', 'wd-req-old']);
    expect(await every({ asset: 'BTC' })).toEqual([]);
    expect(await every({ accountId: 'acct-o', state: 'UNKNOWN' })).toEqual(['wd-unknown']);
    expect((await every({ destination })).sort()).toEqual(['wd-confirmed', 'wd-req-new']);
    // Exact: a prefix or another case matches nothing.
    expect(await every({ destination: destination.slice(0, 20) })).toEqual([]);
    expect(
      await every({
        amountMinMinor: (2n * ETH).toString(),
        amountMaxMinor: (4n * ETH).toString(),
        sort: 'amount_asc',
      }),
    ).toEqual(['wd-req-new', 'wd-unknown', 'wd-broadcast']);
    const hourAgo = new Date(Date.now() - 3600_000).toISOString();
    expect((await every({ from: hourAgo })).sort()).toEqual(['wd-broadcast', 'wd-req-new', 'wd-unknown']);
    expect(await every({ to: hourAgo, sort: 'created_asc' })).toEqual(['wd-req-old', 'wd-confirmed']);
  });

  it('I14-EXPLORER the export returns what the filter selects, capped and marked truncated', async () => {
    const all = await withTenant(t.db, tenantId, (tx) =>
      exportWithdrawals(tx, tenantId, { sort: 'amount_asc' }),
    );
    expect(all.items.map((item) => item.reference)).toEqual([
      'wd-req-old',
      'wd-req-new',
      'wd-unknown',
      'wd-broadcast',
      'wd-confirmed',
    ]);
    expect(all.truncated).toBe(false);
    const capped = await withTenant(t.db, tenantId, (tx) =>
      exportWithdrawals(tx, tenantId, { state: 'REQUESTED' }, { max: 1 }),
    );
    expect(capped.items.map((item) => item.reference)).toEqual(['wd-req-new']);
    expect(capped.truncated).toBe(true);
  });
});

/**
 * The plan of every statement the Overview and the explorer run: sequential and bitmap scans are
 * priced out (on these few rows the planner would otherwise pick a bitmap scan and sort, which on
 * a long history is the slow plan), so a plan can only avoid them with an index that serves the
 * filter and the order; a Sort left in the plan means none does.
 */
describe('I14-OVERVIEW I14-EXPLORER queries use indexes', () => {
  async function plan(query: SQL): Promise<string> {
    return t.db.transaction(async (tx) => {
      await tx.execute(sql`set local enable_seqscan = off`);
      await tx.execute(sql`set local enable_bitmapscan = off`);
      const rows = await tx.execute(sql`explain ${query}`);
      const lines = (Array.isArray(rows) ? rows : (rows as { rows: unknown[] }).rows) as Record<
        string,
        string
      >[];
      return lines.map((line) => Object.values(line)[0]).join('\n');
    });
  }

  it.each(Object.keys(overviewStatements('00000000-0000-0000-0000-000000000000', new Date())))(
    'I14-OVERVIEW %s: no sequential scan, no sort of history',
    async (name) => {
      const statement = overviewStatements(tenantId, new Date())[
        name as keyof ReturnType<typeof overviewStatements>
      ];
      const text = await plan(statement);
      expect(text).not.toMatch(/Seq Scan/);
      expect(text).toMatch(/Index/);
      expect(text).not.toMatch(/using operations_pkey|using operations_page_kind on/);
      if (name === 'latency') {
        // Each confirmation finds its withdrawal by primary key, never a join over the history.
        expect(text).toMatch(/SubPlan/);
        expect(text).toMatch(/Index Scan using operation_transitions_confirmed/);
        expect(text).not.toMatch(/Hash Join|Merge Join/);
      }
      if (name === 'hourly' || name === 'latency') {
        // Grouping per hour orders the day's rows only: the index range is bounded by the day.
        expect(text).toMatch(/Index Cond: .*created_at >=/);
      } else {
        expect(text).not.toMatch(/\bSort\b/);
      }
    },
  );

  const cursorFor = (sort: string) =>
    Buffer.from(
      sort.startsWith('amount')
        ? `2026-11-30 12:00:00.1231+00|${randomUUID()}|1000`
        : `2026-11-30 12:00:00.1231+00|${randomUUID()}`,
    ).toString('base64url');
  const cases: [string, Parameters<typeof explorerPageQuery>[2], string][] = [
    ['default first page', {}, 'operations_page_kind'],
    ['deep cursor', { cursor: cursorFor('created_desc') }, 'operations_page_kind'],
    ['oldest first', { sort: 'created_asc', cursor: cursorFor('created_asc') }, 'operations_page_kind'],
    ['by state', { state: 'BROADCAST', cursor: cursorFor('created_desc') }, 'operations_page_kind_state'],
    ['by account', { accountId: 'acct-o', cursor: cursorFor('created_desc') }, 'operations_page_account'],
    [
      'by exact destination',
      { destination, cursor: cursorFor('created_desc') },
      'operations_page_destination',
    ],
    ['by date range', { from: '2026-11-01T00:00:00Z', to: '2026-11-30T00:00:00Z' }, 'operations_page_kind'],
    [
      'by amount, largest first',
      { sort: 'amount_desc', cursor: cursorFor('amount_desc') },
      'operations_page_amount',
    ],
    [
      'by amount range, smallest first',
      { sort: 'amount_asc', amountMinMinor: '10', amountMaxMinor: '1000' },
      'operations_page_amount',
    ],
    ['by asset', { asset: 'ETH' }, 'operations_page_kind'],
  ];
  it.each(cases)(
    'I14-EXPLORER %s: an index range in order, no sequential scan, no sort',
    async (_name, input, index) => {
      const text = await plan(explorerPageQuery(t.db, tenantId, { limit: 50, ...input }).getSQL());
      expect(text).not.toMatch(/Seq Scan/);
      expect(text).not.toMatch(/\bSort\b/);
      expect(text).toMatch(new RegExp(`Index (Only )?Scan( Backward)? using ${index} on operations`));
    },
  );
});
