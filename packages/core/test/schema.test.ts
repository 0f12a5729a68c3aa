import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { fund, newTenant, submit, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withAppRole } from '../src/db/app-role.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';

let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.dispose());

async function query<T>(statement: ReturnType<typeof sql>): Promise<T[]> {
  return rowsOf<T>(await t.db.execute(statement));
}

describe('the schema can be distributed by tenant and isolates tenants', () => {
  it('every primary key and unique constraint starts with tenant_id', async () => {
    const constraints = await query<{
      table_name: string;
      constraint_name: string;
      first_column: string;
    }>(sql`
      select c.conrelid::regclass::text as table_name, c.conname as constraint_name, a.attname as first_column
        from pg_constraint c
        join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
       where c.contype in ('p', 'u') and c.connamespace = 'public'::regnamespace
         and c.conrelid::regclass::text not like '%drizzle%'`);
    expect(constraints.length).toBeGreaterThan(8);
    // The sign-in budget per client address spans tenants by design and holds no tenant data
    // (a digest and a count, I11-F7): a reference table, not a tenant table.
    // The organisation slugs staff sign in with are unique across the deployment.
    const acrossTenants = new Set(['hot_wallet_addresses', 'sign_in_address_failures', 'tenant_slugs']);
    const offenders = constraints.filter(
      (c) => c.first_column !== 'tenant_id' && !acrossTenants.has(c.table_name),
    );
    expect(offenders).toEqual([]);
  });

  it('every table forces row-level security and carries the tenant policy', async () => {
    const tables = await query<{
      relname: string;
      relrowsecurity: boolean;
      relforcerowsecurity: boolean;
      policies: number;
    }>(sql`
      select c.relname, c.relrowsecurity, c.relforcerowsecurity,
             (select count(*)::int from pg_policy p where p.polrelid = c.oid) as policies
        from pg_class c
       where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'`);
    expect(tables.length).toBeGreaterThan(7);
    for (const table of tables) {
      expect({
        table: table.relname,
        rls: table.relrowsecurity,
        force: table.relforcerowsecurity,
        policy: table.policies > 0,
      }).toEqual({
        table: table.relname,
        rls: true,
        force: true,
        policy: true,
      });
    }
  });

  it('C22 an unfiltered query under the application role sees only the scoped tenant', async () => {
    const a = await newTenant(t.db, 'A');
    const b = await newTenant(t.db, 'B');
    await fund(t.db, a, 'acct-1', 'ETH', 1000n);
    await fund(t.db, b, 'acct-1', 'ETH', 1000n);
    await submit(t.db, a, withdrawal({ amountMinor: '1' }), 'a-1');
    await submit(t.db, b, withdrawal({ amountMinor: '1' }), 'b-1');
    for (const table of [
      'operations',
      'balances',
      'postings',
      'journal_entries',
      'operation_transitions',
      'work_items',
      'assets',
      'tenants',
    ]) {
      const seen = await withTenant(t.db, a, async (tx) =>
        rowsOf<{ tenant_id: string }>(
          await tx.execute(sql`select distinct tenant_id::text from ${sql.identifier(table)}`),
        ),
      );
      expect(seen.map((r) => r.tenant_id)).toEqual([a]);
    }
    // And a write aimed at another tenant's rows touches none of them. RETURNING makes the count
    // visible on both drivers (PGlite reports no row count for a plain UPDATE).
    const touched = await withTenant(t.db, a, async (tx) =>
      rowsOf(
        await tx.execute(
          sql`update operations set version = version + 1 where tenant_id = ${b} returning tenant_id`,
        ),
      ),
    );
    expect(touched).toEqual([]);
    const { current_user } = (
      await withTenant(t.db, a, async (tx) =>
        rowsOf<{ current_user: string }>(await tx.execute(sql`select current_user`)),
      )
    )[0] ?? { current_user: '' };
    expect(current_user).toBe('idem_app');
  });

  it('without a tenant scope the application role sees nothing', async () => {
    const seen = await withAppRole(t.db, async (tx) => {
      return rowsOf(await tx.execute(sql`select * from operations`));
    });
    expect(seen).toEqual([]);
  });
});
