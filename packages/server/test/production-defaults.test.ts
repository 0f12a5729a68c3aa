import { createStaffUser, withTenant } from '@idem/core';
import { createIdemClient } from '@idem/sdk';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { DEFAULT_REPLACE_POLICIES } from '@idem/workers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { readEnv } from '../src/env.ts';
import { workerSettingsFrom } from '../src/worker-settings.ts';
import { startSilentServer } from './support/in-process.ts';
import { provisionTenant, type TenantFixture } from './support/provision.ts';
import { PASSWORD } from './support/staff-http.ts';

/**
 * What a server outside development does by default (I11-F9): session cookies a sibling host or
 * plain http cannot plant or read, and no metrics without a token. The server runs in process on
 * the test database (PostgreSQL or PGlite), as a deployment on PostgreSQL would: not embedded.
 */
const EMAIL = 'admin@prod.invalid';
let database: TestDatabase;
let tenant: TenantFixture;
const running: RunningServer[] = [];

async function serve(env: Record<string, string>, announced: string[] = []): Promise<string> {
  const { server, base } = await startSilentServer(database, env, {
    announce: (line) => announced.push(line),
  });
  running.push(server);
  return base;
}

async function post(base: string, path: string, input: unknown, cookie?: string) {
  return fetch(`${base}/trpc/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(cookie ? { cookie } : {}) },
    body: JSON.stringify(input),
  });
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  tenant = await provisionTenant(database.db, { name: 'Production Defaults' });
  const passwordHash = await hashPassword(PASSWORD);
  await withTenant(database.db, tenant.tenantId, (tx) =>
    createStaffUser(tx, { tenantId: tenant.tenantId, email: EMAIL, role: 'admin', passwordHash }),
  );
});

afterAll(async () => {
  for (const server of running) await server.close();
  await database?.dispose();
});

describe('a production server', () => {
  it('I11-F9 sets __Host- session cookies: Secure, HttpOnly, SameSite=Strict, Path=/, no Domain', async () => {
    const base = await serve({ NODE_ENV: 'production' });
    const signedIn = await post(base, 'staffAuth.signIn', {
      tenantId: tenant.tenantId,
      email: EMAIL,
      password: PASSWORD,
    });
    expect(signedIn.status).toBe(200);
    const [staffCookie] = signedIn.headers.getSetCookie();
    expect(staffCookie).toMatch(
      /^__Host-idem_staff=[0-9a-f-]{36}\.[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+; Secure$/,
    );
    expect(staffCookie).not.toMatch(/domain=/i);

    // The server reads its session from the prefixed cookie, and from no other.
    const pair = staffCookie?.split(';')[0] ?? '';
    const me = await fetch(`${base}/trpc/staffAuth.me`, { headers: { cookie: pair } });
    expect(me.status).toBe(200);
    const planted = pair.replace(/^__Host-/, '');
    const unprefixed = await fetch(`${base}/trpc/staffAuth.me`, { headers: { cookie: planted } });
    expect(unprefixed.status).toBe(401);

    const sdk = createIdemClient({ baseUrl: base, apiKey: tenant.apiKey });
    const { url } = await sdk.customerSessions.create({ accountId: 'cust-7' });
    // Links point at https: the server knows browsers reach it over TLS.
    expect(url).toMatch(/^https:\/\//);
    const exchanged = await post(base, 'customerSessions.exchange', { token: new URL(url).hash.slice(1) });
    expect(exchanged.status).toBe(200);
    const [customerCookie] = exchanged.headers.getSetCookie();
    expect(customerCookie).toMatch(
      /^__Host-idem_customer=[^;]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+; Secure$/,
    );
  });

  it('I11-F9 without IDEM_METRICS_TOKEN serves no /metrics at all', async () => {
    const base = await serve({ NODE_ENV: 'production' });
    const anonymous = await fetch(`${base}/metrics`);
    expect(anonymous.status).toBe(404);
    expect(await anonymous.text()).not.toContain('idem_');
    const guessed = await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer anything' } });
    expect(guessed.status).toBe(404);
  });

  it('I11-F9 with IDEM_METRICS_TOKEN serves /metrics to that bearer only', async () => {
    const base = await serve({ NODE_ENV: 'production', IDEM_METRICS_TOKEN: 'a-production-metrics-token' });
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    const scraped = await fetch(`${base}/metrics`, {
      headers: { authorization: 'Bearer a-production-metrics-token' },
    });
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toMatch(/^idem_operations\{state="CONFIRMED"\} \d+$/m);
  });
});

describe('a development server', () => {
  it('I11-F9 keeps plain cookie names without Secure (http://localhost) and prints a metrics token for this run', async () => {
    const announced: string[] = [];
    const base = await serve({ NODE_ENV: 'development' }, announced);
    const signedIn = await post(base, 'staffAuth.signIn', {
      tenantId: tenant.tenantId,
      email: EMAIL,
      password: PASSWORD,
    });
    expect(signedIn.status).toBe(200);
    expect(signedIn.headers.getSetCookie()[0]).toMatch(
      /^idem_staff=[^;]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+$/,
    );

    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    const token = announced.join('\n').match(/metrics token[^:]*: (\S+)/)?.[1];
    expect(token).toMatch(/^[A-Za-z0-9_-]{32,}$/);
    const scraped = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    expect(scraped.status).toBe(200);
  });
});

describe('I12-STUCK broadcast ages per network', () => {
  it('I12-STUCK IDEM_BROADCAST_ALERT_AFTER_MS / _ESCALATE_AFTER_MS parse per network; a bad entry is refused', () => {
    const env = readEnv({
      IDEM_BROADCAST_ALERT_AFTER_MS: 'ethereum=60000, bitcoin=120000',
      IDEM_BROADCAST_ESCALATE_AFTER_MS: 'ethereum=600000',
    });
    expect(env.IDEM_BROADCAST_ALERT_AFTER_MS).toEqual({ ethereum: 60_000, bitcoin: 120_000 });
    expect(env.IDEM_BROADCAST_ESCALATE_AFTER_MS).toEqual({ ethereum: 600_000 });
    expect(readEnv({}).IDEM_BROADCAST_ALERT_AFTER_MS).toBeUndefined();
    expect(() => readEnv({ IDEM_BROADCAST_ALERT_AFTER_MS: 'solana=60000' })).toThrow(/network=milliseconds/);
    expect(() => readEnv({ IDEM_BROADCAST_ALERT_AFTER_MS: 'ethereum=5' })).toThrow(/network=milliseconds/);
  });

  it('I12-BUMP IDEM_BUMP_AFTER_MS sets the automatic fee-bump age per network; unset keeps the defaults', () => {
    const settings = workerSettingsFrom(readEnv({ IDEM_BUMP_AFTER_MS: 'ethereum=2000' }));
    expect(settings.replacePolicies).toEqual({
      ethereum: { bumpAfterMs: 2_000, maxBumps: DEFAULT_REPLACE_POLICIES.ethereum?.maxBumps },
    });
    expect(workerSettingsFrom(readEnv({})).replacePolicies).toBeUndefined();
    expect(() => readEnv({ IDEM_BUMP_AFTER_MS: 'ethereum=10' })).toThrow(/network=milliseconds/);
  });
});
