import { randomUUID } from 'node:crypto';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { newTenant } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../src/db/rows.ts';
import { workItems } from '../src/db/schema/index.ts';
import { withTenant } from '../src/db/tenant-scope.ts';

let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase({ maxConnections: 2 });
  tenantId = await newTenant(t.db);
});
afterAll(() => t.dispose());

describe.skipIf(!onPostgres)(
  'a connection terminated in the middle of a transaction (real PostgreSQL)',
  () => {
    it('C10 the statements after the loss never run outside the transaction, and nothing of it persists', async () => {
      const killer = postgres(t.url ?? '', { max: 1, onnotice: () => {} });
      const marker = randomUUID();
      try {
        const outcome = await withTenant(t.db, tenantId, async (tx) => {
          const [row] = rowsOf<{ pid: number }>(await tx.execute(sql`select pg_backend_pid() as pid`));
          await killer`select pg_terminate_backend(${row?.pid ?? 0})`;
          // Fixed: gives the terminated backend time to go; there is nothing to poll for inside the dead session.
          await new Promise((resolve) => setTimeout(resolve, 300));
          // Were this to run on a fresh connection, it would commit on its own, outside any tenant scope.
          await tx
            .insert(workItems)
            .values({ tenantId, workId: marker, topic: 'withdrawal.review', payload: {} });
          return 'committed';
        }).catch((error: unknown) => `refused: ${(error as Error).message}`);
        expect(outcome).toMatch(/^refused/);
        // Fixed: a leaked write would show only after it commits; absence cannot be polled for.
        await new Promise((resolve) => setTimeout(resolve, 300));
        const leaked = await t.db.select().from(workItems).where(sql`work_id = ${marker}`);
        expect(leaked).toEqual([]);
      } finally {
        await killer.end();
      }
    });
  },
);
