import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { createTestDatabase, onPostgres } from '../src/database/index.ts';

/**
 * Proves a test database copied from the migrated template is as the migrations leave one: every
 * migration recorded, the database-level grants the migrations revoke still revoked (a copy does not
 * inherit those), and two databases independent of each other.
 */
describe.skipIf(!onPostgres)('test databases copied from the migrated template', () => {
  it('has every migration applied, the grants the migrations set, and is its own database', async () => {
    const first = await createTestDatabase();
    const second = await createTestDatabase();
    const sql = postgres(first.url ?? '', { max: 1, onnotice: () => {} });
    const other = postgres(second.url ?? '', { max: 1, onnotice: () => {} });
    try {
      expect(first.url).not.toBe(second.url);
      const [migrations] = await sql`select count(*)::int as n from drizzle.__drizzle_migrations`;
      const [again] = await other`select count(*)::int as n from drizzle.__drizzle_migrations`;
      expect(migrations?.n).toBeGreaterThan(50);
      expect(again?.n).toBe(migrations?.n);
      const [grants] = await sql`
        select has_database_privilege('public', current_database(), 'TEMPORARY') as public_temp,
               has_database_privilege('idem_app', current_database(), 'TEMPORARY') as app_temp,
               has_database_privilege('idem_app', current_database(), 'CONNECT') as app_connect`;
      expect(grants).toEqual({ public_temp: false, app_temp: false, app_connect: true });
      await sql`create table scratch_only_here (id int)`;
      const [seen] = await other`select to_regclass('scratch_only_here') is not null as there`;
      expect(seen?.there).toBe(false);
    } finally {
      await sql.end();
      await other.end();
      await first.dispose();
      await second.dispose();
    }
  });
});
