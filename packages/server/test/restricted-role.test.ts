import { randomBytes } from 'node:crypto';
import { createStaffUser, withTenant } from '@idem/core';
import { createIdemClient, withdrawalKey } from '@idem/sdk';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { type ServerProcess, startServerProcess } from '@idem/testing/server';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../src/auth/password.ts';
import { idem } from './support/cli-process.ts';
import { printed } from './support/cli-results.ts';
import { ETH, evmAddress, provisionTenant, type TenantFixture } from './support/provision.ts';

const STAFF_PASSWORD = 'a long enough staff password';

/**
 * The production setup of docs/API.md: the server logs in as its own role, a member of idem_app
 * that is neither superuser nor table owner, and migrations ran as the owner beforehand.
 */
describe.skipIf(!onPostgres)('the server on a restricted login role (real PostgreSQL)', () => {
  let t: TestDatabase;
  let tenant: TenantFixture;
  let other: TenantFixture;
  let server: ServerProcess;
  const role = `idem_login_${randomBytes(4).toString('hex')}`;
  let loginUrl = '';

  beforeAll(async () => {
    t = await createTestDatabase({ maxConnections: 4 });
    tenant = await provisionTenant(t.db, { name: 'Restricted' });
    other = await provisionTenant(t.db, { name: 'Neighbour' });
    const owner = postgres(t.url ?? '', { max: 1, onnotice: () => {} });
    try {
      await owner.unsafe(
        `create role ${role} login nosuperuser nocreatedb nocreaterole nobypassrls in role idem_app`,
      );
    } finally {
      await owner.end();
    }
    const url = new URL(t.url ?? '');
    url.username = role;
    loginUrl = url.toString();
    server = await startServerProcess({
      DATABASE_URL: loginUrl,
      IDEM_MIGRATE_ON_START: 'false',
      IDEM_DB_POOL_MAX: '4',
    });
  });

  afterAll(async () => {
    await server?.kill();
    await t?.dispose();
    const admin = postgres(
      process.env.TEST_DATABASE_URL ||
        process.env.DATABASE_URL ||
        'postgres://postgres@127.0.0.1:5432/postgres',
      {
        max: 1,
        onnotice: () => {},
      },
    );
    try {
      await admin.unsafe(`drop role if exists ${role}`);
    } finally {
      await admin.end();
    }
  });

  it('C22 serves withdrawals as a login role that is neither superuser nor owner, which sees one tenant only', async () => {
    const idem = createIdemClient({ baseUrl: server.baseUrl, apiKey: tenant.apiKey });
    const id = randomBytes(6).toString('hex');
    const submitted = await idem.withdrawals.submit(
      {
        withdrawalId: id,
        accountId: 'cust-7',
        asset: 'ETH',
        destination: evmAddress(),
        amountMinor: (ETH / 10n).toString(),
      },
      withdrawalKey(id),
    );
    expect(submitted.outcome).toBe('CREATED');

    // The same role, connected directly: without a tenant scope it sees nothing; with one, one tenant.
    const direct = postgres(loginUrl, { max: 1, onnotice: () => {} });
    try {
      const [who] =
        await direct`select current_user as name, (select rolsuper from pg_roles where rolname = current_user) as superuser`;
      expect(who).toEqual({ name: role, superuser: false });
      expect(await direct`select count(*)::int as n from operations`).toEqual([{ n: 0 }]);
      const scoped = await direct.begin(async (sql) => {
        await sql`select set_config('app.tenant_id', ${tenant.tenantId}, true)`;
        return sql`select distinct tenant_id::text from operations`;
      });
      expect(scoped.map((row) => row.tenant_id)).toEqual([tenant.tenantId]);
      expect(scoped.map((row) => row.tenant_id)).not.toContain(other.tenantId);
      await expect(direct`update postings set amount = amount`).rejects.toThrow(/permission denied/);
    } finally {
      await direct.end();
    }
  });

  it('I31-QUORUM this login role stores an API key or an outbound endpoint only inactive, even as itself', async () => {
    // Not switched to idem_app either: only the tables' owner (the CLI's role) stores them active.
    const direct = postgres(loginUrl, { max: 1, onnotice: () => {} });
    try {
      const insert = (table: 'api_keys' | 'outbound_endpoints') =>
        direct.begin(async (sql) => {
          await sql`select set_config('app.tenant_id', ${tenant.tenantId}, true)`;
          return table === 'api_keys'
            ? sql`insert into api_keys (tenant_id, key_id, key_hash, hint, label, scopes)
                  values (${tenant.tenantId}, gen_random_uuid(), ${randomBytes(32).toString('hex')}, 'abcd',
                          'direct', array['withdraw'])`
            : sql`insert into outbound_endpoints (tenant_id, endpoint_id, url, secret)
                  values (${tenant.tenantId}, gen_random_uuid(), 'https://hooks.example.com/x', 'whsec_x')`;
        });
      await expect(insert('api_keys')).rejects.toThrow(/stored inactive/);
      await expect(insert('outbound_endpoints')).rejects.toThrow(/stored inactive/);
    } finally {
      await direct.end();
    }
  });

  it("I32-DB `idem risk-policy set` on this login tightens a rule but cannot loosen one; the owner's login can", async () => {
    // This login for the CLI's statements, the owner for its migrations (docs/API.md).
    const asLogin = { DATABASE_URL: loginUrl, MIGRATION_DATABASE_URL: t.url ?? '' };
    const asOwner = { DATABASE_URL: t.url ?? '' };
    const set = (env: Record<string, string>, autoApproveMax: string) =>
      idem(
        env,
        ...['risk-policy', 'set', '--tenant', tenant.tenantId, '--asset', 'BTC'],
        ...['--auto-approve-max', autoApproveMax, '--four-eyes-min', '100000000', '--json'],
      );
    // A first BTC rule that auto-approves: refused, with what to do instead.
    const loose = await set(asLogin, '1000000');
    expect(loose.code).toBe(1);
    expect(loose.stdout).toBe('');
    expect(loose.stderr).toMatch(
      /^idem: FORBIDDEN: .*only from the tables' owner: run risk-policy set with the owner's DATABASE_URL/,
    );
    // The deployment's own login sets it; this one then lowers it, which applies at once.
    expect(printed(await set(asOwner, '1000000'))).toMatchObject({ changed: true });
    expect(printed(await set(asLogin, '500000'))).toMatchObject({ changed: true });
    expect((await set(asLogin, '2000000')).stderr).toMatch(/FORBIDDEN/);
  });

  it('I11-F7 staff sign-in is throttled in PostgreSQL by this login role, which cannot touch the counters itself', async () => {
    const email = 'restricted-admin@example.invalid';
    await withTenant(t.db, tenant.tenantId, async (tx) =>
      createStaffUser(tx, {
        tenantId: tenant.tenantId,
        email,
        role: 'admin',
        passwordHash: await hashPassword(STAFF_PASSWORD),
      }),
    );
    const signIn = async (password: string) =>
      (
        await fetch(`${server.baseUrl}/trpc/staffAuth.signIn`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: server.baseUrl },
          body: JSON.stringify({ tenantId: tenant.tenantId, email, password }),
        })
      ).status;
    for (let i = 0; i < 10; i += 1) expect(await signIn('a wrong guess')).toBe(401);
    expect(await signIn(STAFF_PASSWORD)).toBe(429);

    const direct = postgres(loginUrl, { max: 1, onnotice: () => {} });
    try {
      await expect(direct`delete from sign_in_failures`).rejects.toThrow(/permission denied/);
      await expect(direct`update sign_in_address_failures set failures = 0`).rejects.toThrow(
        /permission denied/,
      );
    } finally {
      await direct.end();
    }
  });
});
