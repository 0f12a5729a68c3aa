import { withTenant } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { createStaffOfRoles, startSilentServer } from './support/in-process.ts';
import { provisionTenant, type TenantFixture } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * The staff audit log over real HTTP: who did what, when, from where, and what they
 * asked; refusals and failed sign-ins too; append-only in the database; administrators only.
 */
let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;
let other: TenantFixture;
const { call, signIn } = staffHttp(() => base);

interface Entry {
  actor: string;
  action: string;
  outcome: string;
  sourceAddress: string | null;
  requestId: string | null;
  details: Record<string, unknown>;
}

const session = (tenantId: string, role: 'support' | 'operator' | 'admin'): Promise<StaffSession> =>
  signIn({ tenantId, email: `${role}@audit.invalid`, password: PASSWORD });

async function log(admin: StaffSession, input: Record<string, unknown> = {}): Promise<Entry[]> {
  return dataOf<{ items: Entry[] }>(await call('staffAudit.list', { session: admin, input })).items;
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  const passwordHash = await hashPassword(PASSWORD);
  tenant = await provisionTenant(database.db, { name: 'Audited' });
  other = await provisionTenant(database.db, { name: 'Other' });
  for (const t of [tenant, other]) {
    await createStaffOfRoles(
      database.db,
      t.tenantId,
      ['support', 'operator', 'admin'],
      'audit.invalid',
      passwordHash,
    );
  }
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('I14-AUDIT the staff audit log', () => {
  it('I14-AUDIT a failed and a good sign-in, an action and a refused action are recorded with who, where and what', async () => {
    const refused = await call('staffAuth.signIn', {
      mutation: true,
      input: {
        tenantId: tenant.tenantId,
        email: 'operator@audit.invalid',
        password: 'not the password at all',
      },
    });
    expect(refused.body.error?.data.code).toBe('UNAUTHORIZED');
    const support = await session(tenant.tenantId, 'support');
    const forbidden = await call('staffConsole.redeliver', {
      mutation: true,
      session: support,
      input: {
        workId: '00000000-0000-4000-8000-000000000001',
        endpointId: '00000000-0000-4000-8000-000000000002',
      },
    });
    expect(forbidden.body.error?.data.code).toBe('FORBIDDEN');
    const operator = await session(tenant.tenantId, 'operator');
    const missing = await call('staffConsole.redeliver', {
      mutation: true,
      session: operator,
      input: {
        workId: '00000000-0000-4000-8000-000000000001',
        endpointId: '00000000-0000-4000-8000-000000000002',
      },
    });
    expect(missing.body.error?.data.code).toBe('NOT_FOUND');

    const admin = await session(tenant.tenantId, 'admin');
    const entries = await log(admin);
    const signIns = entries.filter((e) => e.action === 'staffAuth.signIn');
    expect(signIns.find((e) => e.outcome === 'UNAUTHORIZED')).toMatchObject({
      actor: 'anonymous',
      details: { email: 'operator@audit.invalid' },
    });
    expect(JSON.stringify(entries)).not.toContain('not the password at all');
    expect(signIns.filter((e) => e.outcome === 'ok').length).toBeGreaterThanOrEqual(3);
    const redeliveries = entries.filter((e) => e.action === 'staffConsole.redeliver');
    expect(redeliveries.map((e) => e.outcome).sort()).toEqual(['FORBIDDEN', 'NOT_FOUND']);
    for (const entry of entries) {
      expect(entry.sourceAddress).toBe('127.0.0.1');
      expect(entry.requestId).toBeTruthy();
    }
    // Filters: by action and outcome.
    expect((await log(admin, { action: 'staffConsole.redeliver', outcome: 'FORBIDDEN' })).length).toBe(1);
  });

  it('I14-AUDIT only administrators read or export it; another tenant sees none of it', async () => {
    const support = await session(tenant.tenantId, 'support');
    const read = await call('staffAudit.list', { session: support, input: {} });
    expect(read.body.error?.data.code).toBe('FORBIDDEN');
    const otherAdmin = await session(other.tenantId, 'admin');
    const theirs = await log(otherAdmin);
    expect(theirs.every((e) => !JSON.stringify(e).includes(tenant.tenantId))).toBe(true);
    expect(theirs.some((e) => e.action === 'staffConsole.redeliver')).toBe(false);
  });

  it('I14-AUDIT the CSV export holds what the filter selects and is itself audited', async () => {
    const admin = await session(tenant.tenantId, 'admin');
    const exported = dataOf<{ csv: string; rows: number; truncated: boolean }>(
      await call('staffAudit.export', {
        mutation: true,
        session: admin,
        input: { action: 'staffAuth.signIn' },
      }),
    );
    const lines = exported.csv.trim().split('\n');
    expect(lines[0]).toBe('at,actor,action,outcome,sourceAddress,requestId,entryId,details');
    expect(lines.length - 1).toBe(exported.rows);
    expect(lines.slice(1).every((line) => line.includes(',staffAuth.signIn,'))).toBe(true);
    expect((await log(admin, { action: 'staffAudit.export' })).length).toBe(1);
  });

  it('I14-AUDIT the log is append-only for the application role and its owner: no update, delete or truncate', async () => {
    for (const statement of [
      sql`update audit_log set outcome = 'ok'`,
      sql`delete from audit_log`,
      sql`truncate audit_log`,
    ]) {
      const error = await withTenant(database.db, tenant.tenantId, (tx) => tx.execute(statement)).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(error, String(statement.queryChunks[0])).not.toBeNull();
      // The owner (this test's own login) is refused by the trigger, whatever its grants.
      const asOwner = await database.db.execute(statement).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(`${asOwner?.message} ${(asOwner?.cause as Error | undefined)?.message}`).toMatch(/append-only/);
    }
    const admin = await session(tenant.tenantId, 'admin');
    expect((await log(admin)).length).toBeGreaterThan(0);
  });
});
