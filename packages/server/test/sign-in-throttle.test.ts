import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { createStaffUser, createTenant, withTenant } from '@idem/core';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { signInThrottle } from '../src/auth/sign-in-throttle.ts';
import { readEnv } from '../src/env.ts';
import { type ServerProcess, startServerProcess } from './support/server-process.ts';

/**
 * I11-F7: the sign-in guessing limit over real HTTP. Failures are counted per (tenant, e-mail) and
 * per client address in PostgreSQL, never reset wholesale, and password checks are capped.
 */
const PASSWORD = 'a long enough test password';
let passwordHash: string;

interface Answer {
  status: number;
  code: string | undefined;
  retryAfterMs: number | undefined;
  retryAfterHeader: string | null;
}

async function signIn(base: string, tenantId: string, email: string, password: string): Promise<Answer> {
  const response = await fetch(`${base}/trpc/staffAuth.signIn`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: base },
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
  const { tenantId } = await createTenant(db, { name: 'Throttled Exchange' });
  await withTenant(db, tenantId, async (tx) => {
    for (const email of emails) await createStaffUser(tx, { tenantId, email, role: 'admin', passwordHash });
  });
  return { tenantId, emails };
}

const silent = new Writable({ write: (_chunk, _encoding, done) => done() });

beforeAll(async () => {
  passwordHash = await hashPassword(PASSWORD);
});

describe('sign-in throttle in one server', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let base: string;

  beforeAll(async () => {
    database = await createTestDatabase({ maxConnections: 5 });
    server = await startServer(readEnv({ PORT: '0', NODE_ENV: 'test', LOG_LEVEL: 'silent' }), {
      database,
      logDestination: silent,
      announce: () => {},
    });
    base = `http://127.0.0.1:${server.port}`;
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

    // An attacker spends 10,001 failures on throwaway tenants and e-mails through the same code path.
    for (let i = 0; i < 10_001; i += 1) signInThrottle.fail(`${randomUUID()}|throwaway-${i}@x.invalid`);

    // The victim stays locked, even with the right password.
    const still = await signIn(base, victim.tenantId, email, PASSWORD);
    expect(still).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    expect(still.retryAfterMs).toBeGreaterThan(0);
  }, 180_000);
});

describe('sign-in throttle with a cap of one password check at a time', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let base: string;

  beforeAll(async () => {
    database = await createTestDatabase({ maxConnections: 5 });
    server = await startServer(
      readEnv({ PORT: '0', NODE_ENV: 'test', LOG_LEVEL: 'silent', IDEM_PASSWORD_CHECKS_MAX: '1' }),
      { database, logDestination: silent, announce: () => {} },
    );
    base = `http://127.0.0.1:${server.port}`;
  });

  afterAll(async () => {
    await server?.close();
    await database?.dispose();
  });

  it('I11-F7 sign-ins beyond the concurrent password-check cap are refused at once with RATE_LIMITED', async () => {
    const emails = Array.from({ length: 8 }, (_, i) => `burst-${i}@throttle.invalid`);
    const tenant = await staffTenant(database.db, emails);
    const answers = await Promise.all(
      emails.map(async (email) => {
        const started = performance.now();
        const answer = await signIn(base, tenant.tenantId, email, 'a wrong guess');
        return { ...answer, ms: performance.now() - started };
      }),
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
    // Once the burst is over, the right password works: the refusals counted no failure.
    const after = await signIn(base, tenant.tenantId, emails[0] ?? '', PASSWORD);
    expect(after.status).toBe(200);
  }, 60_000);
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
