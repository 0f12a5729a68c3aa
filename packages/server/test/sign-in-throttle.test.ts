import { randomBytes, randomUUID } from 'node:crypto';
import { createStaffUser, createTenant, rowsOf, withTenant } from '@idem/core';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { type ServerProcess, startServerProcess } from '@idem/testing/server';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import {
  addressBudgetOf,
  keysOf,
  PasswordCheckCap,
  takeSignInAttempt,
} from '../src/auth/sign-in-throttle.ts';
import { startSilentServer } from './support/in-process.ts';
import { PASSWORD } from './support/staff-http.ts';

/**
 * I11-F7: the sign-in guessing limit over real HTTP. Failures are counted per (tenant, e-mail) and
 * per client address in PostgreSQL, never reset wholesale, and password checks are capped.
 */
let passwordHash: string;

interface Answer {
  status: number;
  code: string | undefined;
  retryAfterMs: number | undefined;
  retryAfterHeader: string | null;
}

async function signIn(
  base: string,
  tenantId: string,
  email: string,
  password: string,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const response = await fetch(`${base}/trpc/staffAuth.signIn`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: base, ...headers },
    body: JSON.stringify({ tenantId, email, password }),
  });
  const body = (await response.json()) as { error?: { data: { code: string; retryAfterMs?: number } } };
  return {
    status: response.status,
    code: body.error?.data.code,
    retryAfterMs: body.error?.data.retryAfterMs,
    retryAfterHeader: response.headers.get('retry-after'),
  };
}

async function staffTenant(
  db: TestDatabase['db'],
  emails: string[],
): Promise<{ tenantId: string; emails: string[] }> {
  const { tenantId } = await createTenant(db, { name: 'Throttled Exchange', mfaRequired: false });
  await withTenant(db, tenantId, async (tx) => {
    for (const email of emails) await createStaffUser(tx, { tenantId, email, role: 'admin', passwordHash });
  });
  return { tenantId, emails };
}

function randomAddress(): string {
  return `10.${[...randomBytes(3)].join('.')}`;
}

function codeOf(error: unknown): string | undefined {
  for (let cause = error; cause; cause = (cause as { cause?: unknown }).cause) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

beforeAll(async () => {
  passwordHash = await hashPassword(PASSWORD);
});

describe('sign-in throttle in one server', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let base: string;
  let victimKeys = { account: '', address: '' };
  let victimEmail = '';

  beforeAll(async () => {
    database = await createTestDatabase({ maxConnections: 5 });
    ({ server, base } = await startSilentServer(database));
  });

  afterAll(async () => {
    await server?.close();
    await database?.dispose();
  });

  it("I11-F7 10,001 throwaway failures (other tenants, other e-mails) do not unlock the victim's counter", async () => {
    const victim = await staffTenant(database.db, ['victim@throttle.invalid']);
    const email = victim.emails[0] ?? '';
    for (let i = 0; i < 10; i += 1) {
      expect((await signIn(base, victim.tenantId, email, 'a wrong guess')).status).toBe(401);
    }
    const locked = await signIn(base, victim.tenantId, email, PASSWORD);
    expect(locked).toMatchObject({ status: 429, code: 'RATE_LIMITED' });

    // An attacker spends 10,001 failures on throwaway tenants, e-mails and addresses, through the
    // throttle's own function (the SQL every HTTP attempt runs, under the application role), all in
    // one statement: what is measured is the table's behaviour, not 40,000 round trips.
    const taken = await withTenant(database.db, victim.tenantId, async (tx) =>
      rowsOf<{ n: number }>(
        await tx.execute(sql`
          select count(idem_sign_in_take(
            gen_random_uuid(),
            encode(sha256(convert_to('throwaway-' || g || '@x.invalid', 'UTF8')), 'hex'),
            encode(sha256(convert_to('address-' || g || '-' || random(), 'UTF8')), 'hex')
          ))::int as n
          from generate_series(1, 10001) as g`),
      ),
    );
    expect(taken).toEqual([{ n: 10_001 }]);

    // The victim stays locked, even with the right password.
    const still = await signIn(base, victim.tenantId, email, PASSWORD);
    expect(still).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    expect(still.retryAfterMs).toBeGreaterThan(0);
    expect(Number(still.retryAfterHeader)).toBe(Math.ceil((still.retryAfterMs ?? 0) / 1000));
    // The same through tRPC's batch adapter, as the web screens call it.
    const batched = await fetch(`${base}/trpc/staffAuth.signIn?batch=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: base },
      body: JSON.stringify({ 0: { tenantId: victim.tenantId, email, password: PASSWORD } }),
    });
    expect(batched.status).toBe(429);
    expect(Number(batched.headers.get('retry-after'))).toBeGreaterThan(0);
    victimKeys = keysOf({ tenantId: victim.tenantId, email, clientAddress: '127.0.0.1' });
    victimEmail = email;
  }, 300_000);

  it('I11-F7 the counters hold SHA-256 digests only, and the application role may only call the functions', async () => {
    const owner = database.db; // the test connection owns the tables
    const accounts = rowsOf<{ account_hash: string; failures: number }>(
      await owner.execute(sql`select account_hash, failures from sign_in_failures`),
    );
    expect(accounts.find((row) => row.account_hash === victimKeys.account)?.failures).toBe(10);
    const dump = JSON.stringify([
      accounts,
      rowsOf(await owner.execute(sql`select * from sign_in_address_failures`)),
    ]);
    expect(dump).not.toContain(victimEmail);
    expect(dump).not.toContain('throwaway-');
    expect(dump).not.toContain('127.0.0.1');
    expect(dump).toContain(victimKeys.address);

    const tenantId = randomUUID();
    for (const statement of [
      sql`select * from sign_in_failures`,
      sql`select * from sign_in_address_failures`,
      sql`update sign_in_failures set failures = 0`,
      sql`delete from sign_in_address_failures`,
      sql`insert into sign_in_address_failures values (${'0'.repeat(64)}, 0, now())`,
    ]) {
      const refused = await withTenant(owner, tenantId, (tx) => tx.execute(statement)).catch(
        (error: unknown) => error,
      );
      expect(codeOf(refused)).toBe('42501'); // insufficient_privilege
    }
    // The functions themselves refuse anything but digests.
    const raw = await withTenant(owner, tenantId, (tx) =>
      tx.execute(sql`select idem_sign_in_take(${tenantId}::uuid, ${victimEmail}, ${'127.0.0.1'})`),
    ).catch((error: unknown) => error);
    expect(codeOf(raw)).toBe('22023'); // invalid_parameter_value
  });

  it('I11-F7 the clean-up deletes at most 50 windows that are over per attempt, never a live one', async () => {
    const owner = database.db;
    const count = async (table: 'sign_in_failures' | 'sign_in_address_failures', live: boolean) => {
      const rows = rowsOf<{ n: number }>(
        await owner.execute(
          live
            ? sql`select count(*)::int as n from ${sql.identifier(table)} where expires_at > now()`
            : sql`select count(*)::int as n from ${sql.identifier(table)} where expires_at <= now()`,
        ),
      );
      return rows[0]?.n ?? 0;
    };
    // Age 120 throwaway windows of each kind as 15 minutes would; the victim's stays live.
    await owner.execute(sql`update sign_in_failures set expires_at = now() - interval '1 second'
      where (tenant_id, account_hash) in (select tenant_id, account_hash from sign_in_failures
        where account_hash <> ${victimKeys.account} limit 120)`);
    await owner.execute(sql`update sign_in_address_failures set expires_at = now() - interval '1 second'
      where address_hash in (select address_hash from sign_in_address_failures
        where address_hash <> ${victimKeys.address} limit 120)`);
    const liveAccounts = await count('sign_in_failures', true);
    const liveAddresses = await count('sign_in_address_failures', true);
    expect([await count('sign_in_failures', false), await count('sign_in_address_failures', false)]).toEqual([
      120, 120,
    ]);

    await takeSignInAttempt(database.db, {
      tenantId: randomUUID(),
      email: 'one-more@x.invalid',
      clientAddress: randomAddress(),
    });

    expect([await count('sign_in_failures', false), await count('sign_in_address_failures', false)]).toEqual([
      70, 70,
    ]);
    // Every live window survived (plus the attempt's own two).
    expect(await count('sign_in_failures', true)).toBe(liveAccounts + 1);
    expect(await count('sign_in_address_failures', true)).toBe(liveAddresses + 1);
    const victim = rowsOf<{ failures: number }>(
      await owner.execute(
        sql`select failures from sign_in_failures where account_hash = ${victimKeys.account}`,
      ),
    );
    expect(victim[0]?.failures).toBe(10);
  });

  // Last in this block: it spends 127.0.0.1's budget, which every request here comes from.
  it('I11-F7 one address has one budget across tenants and e-mails, and a forged X-Forwarded-For does not escape it', async () => {
    const fresh = await staffTenant(database.db, ['fresh@throttle.invalid', 'other@throttle.invalid']);
    expect((await signIn(base, fresh.tenantId, 'fresh@throttle.invalid', PASSWORD)).status).toBe(200);
    // 100 failures from this address, each on another tenant and e-mail.
    for (let i = 0; i < 100; i += 1) {
      await takeSignInAttempt(database.db, {
        tenantId: randomUUID(),
        email: `sprayed-${i}@x.invalid`,
        clientAddress: '127.0.0.1',
      });
    }
    const refused = await signIn(base, fresh.tenantId, 'other@throttle.invalid', PASSWORD, {
      'x-forwarded-for': randomAddress(),
    });
    expect(refused).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
  });
});

describe('sign-in throttle with a cap of one password check at a time', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let base: string;

  beforeAll(async () => {
    database = await createTestDatabase({ maxConnections: 5 });
    ({ server, base } = await startSilentServer(database, {
      IDEM_PASSWORD_CHECKS_MAX: '1',
      IDEM_TRUSTED_PROXY_HOPS: '1',
    }));
  });

  afterAll(async () => {
    await server?.close();
    await database?.dispose();
  });

  it('I11-F7 sign-ins beyond the concurrent password-check cap are refused at once with RATE_LIMITED', async () => {
    const emails = Array.from({ length: 8 }, (_, i) => `burst-${i}@throttle.invalid`);
    const tenant = await staffTenant(database.db, emails);
    const answers = await Promise.all(
      emails.map((email) => signIn(base, tenant.tenantId, email, 'a wrong guess')),
    );
    const refused = answers.filter((answer) => answer.status === 429);
    const checked = answers.filter((answer) => answer.status === 401);
    expect(refused.length).toBeGreaterThan(0);
    expect(checked.length).toBeGreaterThan(0);
    expect(refused.length + checked.length).toBe(emails.length);
    for (const answer of refused) {
      expect(answer.code).toBe('RATE_LIMITED');
      expect(answer.retryAfterMs).toBeGreaterThan(0);
      expect(answer.retryAfterHeader).toMatch(/^\d+$/);
    }
    // That a refusal does not queue behind the check in progress is the cap's own contract
    // ('the password-check cap' below); comparing the answers' latencies here failed on a loaded
    // machine (132 ms against 130) without any queueing, so this test no longer times them.
    // Once the burst is over, the right password works: the refusals counted no failure.
    const after = await signIn(base, tenant.tenantId, emails[0] ?? '', PASSWORD);
    expect(after.status).toBe(200);
  }, 60_000);

  it('I11-F7 behind one trusted proxy the client is the last X-Forwarded-For entry; entries before it are ignored', async () => {
    const tenant = await staffTenant(database.db, ['proxied@throttle.invalid']);
    for (let i = 0; i < 100; i += 1) {
      await takeSignInAttempt(database.db, {
        tenantId: randomUUID(),
        email: `sprayed-${i}@x.invalid`,
        clientAddress: '203.0.113.9',
      });
    }
    const email = 'proxied@throttle.invalid';
    const spent = await signIn(base, tenant.tenantId, email, PASSWORD, { 'x-forwarded-for': '203.0.113.9' });
    expect(spent).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    // The client wrote the first entry itself; the proxy appended the address it saw.
    const forged = await signIn(base, tenant.tenantId, email, PASSWORD, {
      'x-forwarded-for': '198.51.100.4, 203.0.113.9',
    });
    expect(forged).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    const other = await signIn(base, tenant.tenantId, email, PASSWORD, {
      'x-forwarded-for': '203.0.113.9, 198.51.100.4',
    });
    expect(other.status).toBe(200);
  });
});

describe.skipIf(!onPostgres)('sign-in throttle across two server processes (real PostgreSQL)', () => {
  let database: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase({ maxConnections: 4 });
    const env = { DATABASE_URL: database.url ?? '', IDEM_DB_POOL_MAX: '3', IDEM_MIGRATE_ON_START: 'false' };
    servers = await Promise.all([startServerProcess(env), startServerProcess(env)]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await database?.dispose();
  });

  it('I11-F7 two server processes on one database share one failure budget per e-mail', async () => {
    const [a, b] = servers;
    if (!a || !b) throw new Error('servers not started');
    const victim = await staffTenant(database.db, ['shared@throttle.invalid']);
    const email = victim.emails[0] ?? '';
    for (let i = 0; i < 5; i += 1) {
      expect((await signIn(a.baseUrl, victim.tenantId, email, 'a wrong guess')).status).toBe(401);
      expect((await signIn(b.baseUrl, victim.tenantId, email, 'a wrong guess')).status).toBe(401);
    }
    // Ten failures in all, five on each process: both processes refuse, even the right password.
    expect(await signIn(a.baseUrl, victim.tenantId, email, PASSWORD)).toMatchObject({
      status: 429,
      code: 'RATE_LIMITED',
    });
    expect(await signIn(b.baseUrl, victim.tenantId, email, PASSWORD)).toMatchObject({
      status: 429,
      code: 'RATE_LIMITED',
    });
  }, 120_000);
});

describe('the password-check cap', () => {
  it('I11-F7 beyond the cap a check is refused at once, not queued; a release frees its slot once', () => {
    const cap = new PasswordCheckCap(2);
    const first = cap.tryAcquire();
    const second = cap.tryAcquire();
    expect(first).toBeTypeOf('function');
    expect(second).toBeTypeOf('function');
    // Synchronous null: the caller answers RATE_LIMITED without waiting for a slot.
    expect(cap.tryAcquire()).toBeNull();
    first?.();
    first?.();
    // Releasing twice frees one slot, not two.
    const third = cap.tryAcquire();
    expect(third).toBeTypeOf('function');
    expect(cap.tryAcquire()).toBeNull();
    second?.();
    third?.();
    expect(cap.tryAcquire()).toBeTypeOf('function');
  });
});

describe('the unit an address budget covers', () => {
  it('I11-F7 an IPv6 /64 is one budget; an IPv4-mapped address is its IPv4 address', () => {
    expect(addressBudgetOf('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(addressBudgetOf('2001:0db8:0001:0002::9')).toBe('2001:db8:1:2::/64');
    expect(addressBudgetOf('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressBudgetOf('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressBudgetOf('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(addressBudgetOf('192.0.2.1')).toBe('192.0.2.1');
  });
});
