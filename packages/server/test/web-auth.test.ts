import type { StaffRole } from '@idem/contracts';
import { createStaffUser, withTenant } from '@idem/core';
import { createIdemClient } from '@idem/sdk';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { startSilentServer } from './support/in-process.ts';
import { ETH, evmAddress, provisionTenant, type TenantFixture } from './support/provision.ts';
import { PASSWORD } from './support/staff-http.ts';

/**
 * The web screens' server side, over real HTTP: who may sign in, what each role may do, CSRF on
 * mutations, session expiry and revocation, one-time customer links, and tenant isolation.
 */
let database: TestDatabase;
let server: RunningServer;
let base: string;
let origin: string;
const tenants: Record<'a' | 'b', TenantFixture & { staff: Record<StaffRole, string> }> = {} as never;

interface Answer {
  status: number;
  body: { result?: { data: unknown }; error?: { data: { code: string; detail: string; requestId: string } } };
  setCookie: string[];
}

interface Session {
  cookie: string;
  csrf: string;
}

async function call(
  path: string,
  options: {
    input?: unknown;
    session?: Session;
    mutation?: boolean;
    csrf?: string | null;
    origin?: string | null;
  } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.session) headers.cookie = options.session.cookie;
  const csrf = options.csrf === undefined ? options.session?.csrf : options.csrf;
  if (csrf) headers['x-csrf-token'] = csrf;
  const sentOrigin = options.origin === undefined ? origin : options.origin;
  if (sentOrigin) headers.origin = sentOrigin;
  const response = options.mutation
    ? await fetch(`${base}/trpc/${path}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(options.input ?? null),
      })
    : await fetch(
        `${base}/trpc/${path}${options.input === undefined ? '' : `?input=${encodeURIComponent(JSON.stringify(options.input))}`}`,
        { headers },
      );
  return {
    status: response.status,
    body: (await response.json()) as Answer['body'],
    setCookie: response.headers.getSetCookie(),
  };
}

function dataOf<T>(answer: Answer): T {
  if (!answer.body.result) throw new Error(`no result (${answer.status}): ${JSON.stringify(answer.body)}`);
  return answer.body.result.data as T;
}

function cookieFrom(answer: Answer): string {
  const first = answer.setCookie[0];
  if (!first) throw new Error(`no cookie set: ${JSON.stringify(answer.body)}`);
  return first.split(';')[0] ?? '';
}

async function signIn(tenant: 'a' | 'b', role: StaffRole): Promise<Session> {
  const answer = await call('staffAuth.signIn', {
    mutation: true,
    input: { tenantId: tenants[tenant].tenantId, email: tenants[tenant].staff[role], password: PASSWORD },
  });
  expect(answer.status).toBe(200);
  return { cookie: cookieFrom(answer), csrf: dataOf<{ csrfToken: string }>(answer).csrfToken };
}

async function openCustomer(tenant: 'a' | 'b', accountId = 'cust-7'): Promise<Session> {
  const sdk = createIdemClient({ baseUrl: base, apiKey: tenants[tenant].apiKey });
  const { url } = await sdk.customerSessions.create({ accountId });
  const token = new URL(url).hash.slice(1);
  const answer = await call('customerSessions.exchange', { mutation: true, input: { token } });
  expect(answer.status).toBe(200);
  return { cookie: cookieFrom(answer), csrf: dataOf<{ csrfToken: string }>(answer).csrfToken };
}

async function customerWithdraw(
  session: Session,
  amountMinor: string,
): Promise<{ operationId: string; state: string }> {
  const answer = await call('customer.withdraw', {
    mutation: true,
    session,
    input: { intentId: crypto.randomUUID(), asset: 'ETH', destination: evmAddress(), amountMinor },
  });
  expect(answer.status).toBe(200);
  return dataOf<{ withdrawal: { operationId: string; state: string } }>(answer).withdrawal;
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  const passwordHash = await hashPassword(PASSWORD);
  for (const key of ['a', 'b'] as const) {
    const fixture = await provisionTenant(database.db, { name: `Web ${key}` });
    const staff = {} as Record<StaffRole, string>;
    await provisionRiskPolicy(database.db, {
      tenantId: fixture.tenantId,
      assetCode: 'ETH',
      autoApproveMaxMinor: ETH.toString(),
      fourEyesMinMinor: (5n * ETH).toString(),
      actor: 'test',
    });
    await withTenant(database.db, fixture.tenantId, async (tx) => {
      for (const role of ['support', 'approver', 'operator', 'admin'] as const) {
        staff[role] = `${role}@${key}.invalid`;
        await createStaffUser(tx, { tenantId: fixture.tenantId, email: staff[role], role, passwordHash });
      }
    });
    tenants[key] = { ...fixture, staff };
  }
  ({ server, base } = await startSilentServer(database));
  origin = base;
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('staff sign-in', () => {
  it('sets an httpOnly, SameSite=Strict session cookie and never returns the password hash', async () => {
    const answer = await call('staffAuth.signIn', {
      mutation: true,
      input: { tenantId: tenants.a.tenantId, email: tenants.a.staff.admin, password: PASSWORD },
    });
    expect(answer.status).toBe(200);
    expect(answer.setCookie[0]).toMatch(
      /^idem_staff=[0-9a-f-]{36}\.[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+$/,
    );
    expect(JSON.stringify(answer.body)).not.toContain('argon2');
  });

  it('answers a wrong password and an unknown e-mail alike, 401', async () => {
    const wrong = await call('staffAuth.signIn', {
      mutation: true,
      input: { tenantId: tenants.a.tenantId, email: tenants.a.staff.admin, password: 'not the password' },
    });
    const unknown = await call('staffAuth.signIn', {
      mutation: true,
      input: { tenantId: tenants.a.tenantId, email: 'nobody@a.invalid', password: PASSWORD },
    });
    expect([wrong.status, unknown.status]).toEqual([401, 401]);
    expect(wrong.body.error?.data.detail).toBe(unknown.body.error?.data.detail);
    expect(wrong.setCookie).toEqual([]);
  });

  it("refuses another tenant's staff: the e-mail exists only in its own tenant", async () => {
    const answer = await call('staffAuth.signIn', {
      mutation: true,
      input: { tenantId: tenants.b.tenantId, email: tenants.a.staff.admin, password: PASSWORD },
    });
    expect(answer.status).toBe(401);
  });
});

describe('roles are enforced by the server', () => {
  it('support reads the queues but may not decide, resolve or brand', async () => {
    const support = await signIn('a', 'support');
    expect((await call('staff.approvals', { session: support, input: {} })).status).toBe(200);
    const customer = await openCustomer('a');
    const held = await customerWithdraw(customer, (2n * ETH).toString());
    const decide = await call('staff.decide', {
      mutation: true,
      session: support,
      input: { operationId: held.operationId, payloadHash: '0'.repeat(64), decision: 'approve' },
    });
    expect(decide.status).toBe(403);
    expect(decide.body.error?.data.code).toBe('FORBIDDEN');
    const brand = await call('branding.set', {
      mutation: true,
      session: support,
      input: { displayName: 'x', logoUrl: null, primaryColor: '#000000' },
    });
    expect(brand.status).toBe(403);
  });

  it('an operator may not approve; an approver may not brand; an admin may brand', async () => {
    const operator = await signIn('a', 'operator');
    const approver = await signIn('a', 'approver');
    const admin = await signIn('a', 'admin');
    const customer = await openCustomer('a');
    const held = await customerWithdraw(customer, (2n * ETH + 1n).toString());
    const detail = await call('staff.get', { session: approver, input: { operationId: held.operationId } });
    const payloadHash = dataOf<{ operation: { payloadHash: string } }>(detail).operation.payloadHash;

    const byOperator = await call('staff.decide', {
      mutation: true,
      session: operator,
      input: { operationId: held.operationId, payloadHash, decision: 'approve' },
    });
    expect(byOperator.status).toBe(403);
    const byApprover = await call('staff.decide', {
      mutation: true,
      session: approver,
      input: { operationId: held.operationId, payloadHash, decision: 'approve' },
    });
    expect(byApprover.status).toBe(200);
    expect(byApprover.body.result?.data).toMatchObject({ state: 'APPROVED', approvalsGiven: 1 });

    const branding = {
      displayName: 'Alpha',
      logoUrl: 'https://cdn.example/logo.svg',
      primaryColor: '#112233',
    };
    expect((await call('branding.set', { mutation: true, session: approver, input: branding })).status).toBe(
      403,
    );
    expect((await call('branding.set', { mutation: true, session: admin, input: branding })).status).toBe(
      200,
    );
    const seen = await call('customer.me', { session: customer });
    expect(dataOf<{ branding: unknown }>(seen).branding).toEqual(branding);
  });

  it('C24 staff actions are recorded with the staff actor; the requester cannot approve their own withdrawal', async () => {
    const admin = await signIn('a', 'admin');
    const me = (await call('staffAuth.me', { session: admin })).body.result?.data as { userId: string };
    const created = await call('staff.withdraw', {
      mutation: true,
      session: admin,
      input: {
        intentId: crypto.randomUUID(),
        accountId: 'cust-7',
        asset: 'ETH',
        destination: evmAddress(),
        amountMinor: (2n * ETH + 2n).toString(),
      },
    });
    const { operationId } = dataOf<{ withdrawal: { operationId: string } }>(created).withdrawal;
    const detail = await call('staff.get', { session: admin, input: { operationId } });
    const view = detail.body.result?.data as { operation: { payloadHash: string; requester: string } };
    expect(view.operation.requester).toBe(`staff:${me.userId}`);
    const self = await call('staff.decide', {
      mutation: true,
      session: admin,
      input: { operationId, payloadHash: view.operation.payloadHash, decision: 'approve' },
    });
    expect(self.status).toBe(403);
    expect(self.body.error?.data.detail).toContain('requester');
  });
});

describe('CSRF and origin', () => {
  it('refuses a session mutation without the CSRF token, with a wrong one, or from another origin', async () => {
    const admin = await signIn('a', 'admin');
    const input = { displayName: 'Alpha', logoUrl: null, primaryColor: '#223344' };
    const missing = await call('branding.set', { mutation: true, session: admin, input, csrf: null });
    const wrong = await call('branding.set', { mutation: true, session: admin, input, csrf: 'x'.repeat(43) });
    const foreign = await call('branding.set', {
      mutation: true,
      session: admin,
      input,
      origin: 'https://evil.example',
    });
    expect([missing.status, wrong.status, foreign.status]).toEqual([403, 403, 403]);
    expect((await call('branding.set', { mutation: true, session: admin, input })).status).toBe(200);
  });

  it('refuses a sign-in posted from another origin', async () => {
    const answer = await call('staffAuth.signIn', {
      mutation: true,
      origin: 'https://evil.example',
      input: { tenantId: tenants.a.tenantId, email: tenants.a.staff.admin, password: PASSWORD },
    });
    expect(answer.status).toBe(403);
    expect(answer.setCookie).toEqual([]);
  });
});

describe('session lifetime', () => {
  it('an expired session is refused', async () => {
    const support = await signIn('a', 'support');
    expect((await call('staffAuth.me', { session: support })).status).toBe(200);
    // The test database connection is the owner: it may age the session as time would.
    await database.db.execute(
      sql`update web_sessions set expires_at = now() - interval '1 second' where kind = 'staff'`,
    );
    expect((await call('staffAuth.me', { session: support })).status).toBe(401);
  });

  it('sign-out revokes the session on the server, not only the cookie', async () => {
    const support = await signIn('a', 'support');
    expect((await call('staffAuth.signOut', { mutation: true, session: support })).status).toBe(200);
    expect((await call('staffAuth.me', { session: support })).status).toBe(401);
  });

  it('a customer link works once', async () => {
    const sdk = createIdemClient({ baseUrl: base, apiKey: tenants.a.apiKey });
    const { url, expiresAt } = await sdk.customerSessions.create({
      accountId: 'cust-7',
      expiresInSeconds: 60,
    });
    expect(Date.parse(expiresAt) - Date.now()).toBeLessThanOrEqual(60_000);
    const token = new URL(url).hash.slice(1);
    const first = await call('customerSessions.exchange', { mutation: true, input: { token } });
    const second = await call('customerSessions.exchange', { mutation: true, input: { token } });
    expect([first.status, second.status]).toEqual([200, 401]);
  });
});

describe('C22 tenant and account isolation', () => {
  it("staff of one tenant get NOT_FOUND for another tenant's operation, and a forged tenant in the cookie is refused", async () => {
    const customerB = await openCustomer('b');
    const inB = await customerWithdraw(customerB, '1000');
    const supportA = await signIn('a', 'support');
    const answer = await call('staff.get', { session: supportA, input: { operationId: inB.operationId } });
    expect(answer.status).toBe(404);
    const search = await call('staff.search', { session: supportA, input: { query: inB.operationId } });
    expect(dataOf<{ items: unknown[] }>(search).items).toEqual([]);
    // The same search by tenant B's staff finds it: the empty answer above is isolation, not a miss.
    const supportB = await signIn('b', 'support');
    const own = await call('staff.search', { session: supportB, input: { query: inB.operationId } });
    expect(dataOf<{ items: { operationId: string }[] }>(own).items.map((item) => item.operationId)).toEqual([
      inB.operationId,
    ]);

    const secret = supportA.cookie.split('.').at(-1) ?? '';
    const forged = { ...supportA, cookie: `idem_staff=${tenants.b.tenantId}.${secret}` };
    expect((await call('staffAuth.me', { session: forged })).status).toBe(401);
  });

  it("a customer sees only their own account: another account's withdrawal is NOT_FOUND", async () => {
    const mine = await openCustomer('a', 'cust-7');
    const other = await openCustomer('a', 'cust-8');
    const withdrawal = await customerWithdraw(mine, '1001');
    const answer = await call('customer.withdrawal', {
      session: other,
      input: { operationId: withdrawal.operationId },
    });
    expect(answer.status).toBe(404);
    const list = await call('customer.withdrawals', { session: other, input: {} });
    expect(dataOf<{ items: unknown[] }>(list).items).toEqual([]);
    // The owner's own list and detail do show it.
    const own = await call('customer.withdrawals', { session: mine, input: {} });
    expect(dataOf<{ items: { operationId: string }[] }>(own).items.map((item) => item.operationId)).toContain(
      withdrawal.operationId,
    );
    const detail = await call('customer.withdrawal', {
      session: mine,
      input: { operationId: withdrawal.operationId },
    });
    expect(detail.status).toBe(200);
    const me = await call('customer.me', { session: other });
    expect(dataOf<{ accountId: string }>(me).accountId).toBe('cust-8');
  });

  it('a customer session cannot call staff procedures, nor a staff session customer ones', async () => {
    const customer = await openCustomer('a');
    const staff = await signIn('a', 'admin');
    expect((await call('staff.approvals', { session: customer, input: {} })).status).toBe(401);
    expect((await call('customer.me', { session: staff })).status).toBe(401);
  });
});
