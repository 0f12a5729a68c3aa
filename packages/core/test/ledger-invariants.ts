import { sql } from 'drizzle-orm';
import { expect } from 'vitest';
import type { Database } from '../src/db/connect.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { HOLDING_STATES } from '../src/state-machine/transitions.ts';

/**
 * The journal's invariants for one tenant: every entry balances per asset; every balance equals the
 * sum of its postings; nothing is negative; every withdrawal that still holds funds is covered by its
 * account's held balance, and the held balance is exactly what the holding withdrawals hold.
 */
export async function expectLedgerInvariants(db: Database, tenantId: string): Promise<void> {
  await withTenant(db, tenantId, async (tx) => {
    const unbalanced = rowsOf(
      await tx.execute(
        sql`select entry_id from postings group by entry_id, asset_code having sum(amount) <> 0`,
      ),
    );
    expect(unbalanced).toEqual([]);
    const mismatched = rowsOf(
      await tx.execute(sql`
        select b.account_ref from balances b
          left join (select account, asset_code,
                            sum(amount) filter (where bucket = 'available') as available,
                            sum(amount) filter (where bucket = 'held') as held
                       from postings where bucket <> 'control' group by account, asset_code) p
            on p.account = b.account_ref and p.asset_code = b.asset_code
         where b.available <> coalesce(p.available, 0) or b.held <> coalesce(p.held, 0)`),
    );
    expect(mismatched).toEqual([]);
    const negative = rowsOf(await tx.execute(sql`select 1 from balances where available < 0 or held < 0`));
    expect(negative).toEqual([]);
    const holding = sql.join(
      HOLDING_STATES.map((s) => sql`${s}`),
      sql`, `,
    );
    const uncovered = rowsOf(
      await tx.execute(sql`
        select b.account_ref from balances b
          left join (select account_ref, asset_code, sum(amount_minor) as total from operations
                      where kind = 'withdrawal' and state in (${holding}) group by account_ref, asset_code) o
            on o.account_ref = b.account_ref and o.asset_code = b.asset_code
         where b.held <> coalesce(o.total, 0)`),
    );
    expect(uncovered).toEqual([]);
  });
}
