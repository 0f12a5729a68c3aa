/**
 * The schema stays ready for distribution by tenant (docs/SERIALIZATION.md, "Beyond one primary";
 * control C25). On Citus every table is distributed by tenant_id, and Citus refuses a
 * primary key, unique constraint or foreign key of a distributed table that does not include the
 * distribution column; we hold the stricter rule that it leads with tenant_id, so every key and
 * every foreign key is colocated by construction. The few exceptions are listed here with why, and
 * every SECURITY DEFINER function (the only code that may read across tenants) is listed in the
 * document: a new one, or a new key that does not lead with tenant_id, fails this test.
 */
import { readFileSync } from 'node:fs';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../src/db/rows.ts';

/** Tables outside the tenant rule, and what they become on Citus. */
const NOT_BY_TENANT: Record<string, string> = {
  // Throttles sign-in attempts per client address across all tenants (an attacker does not pick one).
  sign_in_address_failures: 'a reference table (or a coordinator-local table): keyed by address, not tenant',
  // The organisation slugs staff sign in with: unique across the deployment by nature.
  tenant_slugs: 'a reference table: slug to tenant id, read only through idem_tenant_for_slug',
  // One hot-wallet address is one nonce sequence: claimed by one tenant across the deployment.
  hot_wallet_addresses:
    'a reference table: (network, address) to tenant id, written by a trigger on hot_wallets',
};

const serialization = readFileSync(new URL('../../../docs/SERIALIZATION.md', import.meta.url), 'utf8');

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.dispose());

describe('distribution by tenant (Citus readiness)', () => {
  it('I16 C25 every table has tenant_id, and every primary key, unique key and foreign key leads with it (both sides), except the listed tables', async () => {
    const tables = rowsOf<{ name: string; has_tenant: boolean }>(
      await t.db.execute(sql`
        select c.relname as name,
               exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped) as has_tenant
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'public' and c.relkind in ('r', 'p') and c.relname not like '__drizzle%'`),
    );
    const keys = rowsOf<{ tbl: string; name: string; kind: string; cols: string; ref_cols: string | null }>(
      await t.db.execute(sql`
        select c.conrelid::regclass::text as tbl, c.conname as name, c.contype::text as kind,
               (select string_agg(a.attname, ',' order by k.ord) from unnest(c.conkey) with ordinality k(attnum, ord)
                  join pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.attnum) as cols,
               (select string_agg(a.attname, ',' order by k.ord) from unnest(c.confkey) with ordinality k(attnum, ord)
                  join pg_attribute a on a.attrelid = c.confrelid and a.attnum = k.attnum) as ref_cols
        from pg_constraint c join pg_namespace n on n.oid = c.connamespace
        where n.nspname = 'public' and c.contype in ('p', 'u', 'f')
        union all
        select i.indrelid::regclass::text, i.indexrelid::regclass::text, 'unique index',
               (select string_agg(a.attname, ',' order by k.ord) from unnest(i.indkey::int2[]) with ordinality k(attnum, ord)
                  join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum),
               null
        from pg_index i join pg_class c on c.oid = i.indrelid join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'public' and i.indisunique
          and not exists (select 1 from pg_constraint x where x.conindid = i.indexrelid)`),
    );
    expect(tables.length).toBeGreaterThan(20);
    expect(keys.length).toBeGreaterThan(40);
    const violations = [
      ...tables
        .filter((table) => !table.has_tenant && !(table.name in NOT_BY_TENANT))
        .map((table) => `${table.name} has no tenant_id`),
      ...keys
        .filter((key) => !(key.tbl.replaceAll('"', '') in NOT_BY_TENANT))
        .filter(
          (key) =>
            !key.cols?.startsWith('tenant_id') ||
            (key.ref_cols !== null && !key.ref_cols.startsWith('tenant_id')),
        )
        .map(
          (key) =>
            `${key.tbl}.${key.name} (${key.kind}: ${key.cols}${key.ref_cols ? ` -> ${key.ref_cols}` : ''})`,
        ),
    ];
    expect(violations).toEqual([]);
    // The exceptions still exist: a stale allowlist hides nothing but misleads the reader.
    for (const name of Object.keys(NOT_BY_TENANT)) expect(tables.map((table) => table.name)).toContain(name);
  });

  it('I16 C25 every SECURITY DEFINER function (the only code that reads across tenants) is listed in docs/SERIALIZATION.md', async () => {
    const definers = rowsOf<{ name: string }>(
      await t.db.execute(sql`
        select p.proname as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname = 'public' and p.prosecdef order by 1`),
    ).map((row) => row.name);
    expect(definers.length).toBeGreaterThan(0);
    const section = serialization.slice(serialization.indexOf('## Beyond one primary'));
    expect(definers.filter((name) => !section.includes(`\`${name}\``))).toEqual([]);
  });
});
