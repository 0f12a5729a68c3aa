import { listAudit, rowsOf, withTenant } from '@idem/core';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { idem } from './support/cli-process.ts';
import { createStaffOfRoles, startSilentServer } from './support/in-process.ts';
import { provisionTenant, type TenantFixture } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * Verifying the audit chain, as an operator does (`idem audit verify`, a child process on the
 * database) and as an administrator does (`staffAudit.verify`): a chain of real staff actions
 * holds after a burst of concurrent actions, with its count and head hash; after one row's field is edited in SQL by the owner, both
 * name exactly that row and the CLI exits non-zero. The CLI runs against PostgreSQL only (on PGlite
 * the server in this process holds the data directory).
 */
let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;
let other: TenantFixture;
const { call, signIn } = staffHttp(() => base);

interface Report {
  tenantId: string;
  ok: boolean;
  entries: number;
  headHash: string;
  break: { entryId: string | null; position: number; check: string; expected: string; found: string } | null;
}

const session = (tenantId: string, role: 'support' | 'admin'): Promise<StaffSession> =>
  signIn({ tenantId, email: `${role}@verify.invalid`, password: PASSWORD });

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  tenant = await provisionTenant(database.db, { name: 'Verified' });
  other = await provisionTenant(database.db, { name: 'Untouched' });
  const passwordHash = await hashPassword(PASSWORD);
  for (const t of [tenant, other]) {
    await createStaffOfRoles(database.db, t.tenantId, ['support', 'admin'], 'verify.invalid', passwordHash);
  }
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

const cliEnv = () => ({ DATABASE_URL: database.url ?? '', IDEM_DB_POOL_MAX: '4' });

describe('I31-AUDIT verifying the audit chain', () => {
  it('I31-AUDIT an edited row is named by staffAudit.verify and by idem audit verify, which exits non-zero', async () => {
    const admin = await session(tenant.tenantId, 'admin');
    const support = await session(tenant.tenantId, 'support');
    await session(other.tenantId, 'admin');
    expect((await call('staffAudit.verify', { session: support })).body.error?.data.code).toBe('FORBIDDEN');
    // A burst of audited actions at once: accepted exports (recorded with their transaction) and
    // refused ones (recorded by the middleware on their own), interleaved on one tenant's chain.
    const burst = await Promise.all(
      Array.from({ length: 24 }, (_, n) =>
        call('staffAudit.export', { mutation: true, session: n % 2 ? admin : support, input: {} }),
      ),
    );
    expect(burst.map((answer) => answer.body.error?.data.code ?? 'ok').sort()).toEqual([
      ...Array<string>(12).fill('FORBIDDEN'),
      ...Array<string>(12).fill('ok'),
    ]);

    const sound = dataOf<Report>(await call('staffAudit.verify', { session: admin }));
    expect(sound).toMatchObject({ tenantId: tenant.tenantId, ok: true, break: null });
    expect(sound.entries).toBeGreaterThanOrEqual(24 + 2);
    if (onPostgres) {
      const run = await idem(cliEnv(), 'audit', 'verify', '--tenant', tenant.tenantId, '--json');
      expect(run.code, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({ ok: true, tenants: [sound] });
    }

    const { items } = await withTenant(database.db, tenant.tenantId, (tx) =>
      listAudit(tx, tenant.tenantId, { outcome: 'FORBIDDEN' }),
    );
    const forbidden = items[0];
    if (!forbidden) throw new Error('the refused export was not logged');
    // The owner's login sets the append-only trigger aside and rewrites a refusal as a success.
    await database.db.transaction(async (tx) => {
      await tx.execute(sql`alter table audit_log disable trigger audit_log_append_only`);
      await tx.execute(sql`update audit_log set outcome = 'ok' where entry_id = ${forbidden.entryId}`);
      await tx.execute(sql`alter table audit_log enable trigger audit_log_append_only`);
    });
    const [edited] = rowsOf<{ position: number }>(
      await database.db.execute(
        sql`select chain_position::int as position from audit_log where entry_id = ${forbidden.entryId}`,
      ),
    );

    const broken = dataOf<Report>(await call('staffAudit.verify', { session: admin }));
    expect(broken).toMatchObject({
      ok: false,
      entries: (edited?.position ?? 0) - 1,
      break: { entryId: forbidden.entryId, position: edited?.position, check: 'hash' },
    });
    if (onPostgres) {
      const run = await idem(cliEnv(), 'audit', 'verify', '--json');
      expect(run.code).toBe(1);
      const printed = JSON.parse(run.stdout) as { ok: boolean; tenants: Report[] };
      expect(printed.ok).toBe(false);
      expect(printed.tenants.find((r) => r.tenantId === tenant.tenantId)?.break).toEqual(broken.break);
      expect(printed.tenants.find((r) => r.tenantId === other.tenantId)).toMatchObject({
        ok: true,
        break: null,
      });
      expect(run.stderr).toContain(
        `breaks at position ${edited?.position} (entry ${forbidden.entryId}), check hash`,
      );
    }
  });
});
