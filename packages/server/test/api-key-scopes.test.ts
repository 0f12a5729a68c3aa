import { createIdemClient, IdemApiError, withdrawalKey } from '@idem/sdk';
import { describe, expect, it } from 'vitest';
import { restRoutes } from '../src/rest/routes.ts';
import { approveAndApply } from './support/control-changes.ts';
import { ETH, evmAddress, uniqueId } from './support/provision.ts';
import { dataOf } from './support/staff-http.ts';
import { type TwoAdminsMember, twoAdminsTenant } from './support/two-admins.ts';

/**
 * API keys with scopes, owners and expiry, over real HTTP. The insider path first: an admin mints a
 * key, submits through REST a withdrawal above the auto-approve limit to an address of their
 * choice, and tries to approve it alone. The withdrawal's requester is the key, and the staff who
 * created or last widened the key stand behind it, so four eyes refuses them as it refuses any
 * requester. Then: a key without a scope is refused that scope's calls with nothing leaked, and a
 * key past its expiry is refused like a revoked one, even while this server's key cache (one
 * minute here) still holds it.
 */
// A new key or an added scope is a control change (I31-QUORUM); here it applies once approved.
// A one-minute key cache, so only an expiry the cache itself honours refuses an expired key in time.
const setup = twoAdminsTenant({
  name: 'Keys',
  domain: 'keys.invalid',
  looseningDelaySeconds: 0,
  env: { IDEM_API_KEY_CACHE_MS: '60000' },
});
const { call, session } = setup;
type Who = TwoAdminsMember;

interface KeyView {
  keyId: string;
  scopes: string[];
  createdBy: string | null;
  widenedBy: string | null;
  expiresAt: string | null;
}

/** Minted by `who`, approved by the other admin and applied (the tenant has no delay here). */
async function mintKey(
  who: Who,
  input: { label: string; scopes: string[]; expiresAt?: string | null },
): Promise<{ keyId: string; apiKey: string }> {
  const minted = dataOf<{ keyId: string; apiKey: string; proposalId: string }>(
    await call('staffConfig.createApiKey', { mutation: true, session: await session(who), input }),
  );
  const other = await session(who === 'admin' ? 'admin2' : 'admin');
  await approveAndApply(setup.database.db, setup.tenant.tenantId, call, other, minted.proposalId);
  return minted;
}

async function listedKey(keyId: string): Promise<KeyView | undefined> {
  const keys = dataOf<KeyView[]>(await call('staffConfig.apiKeys', { session: await session('admin') }));
  return keys.find((key) => key.keyId === keyId);
}

async function rest(method: 'GET' | 'POST', path: string, apiKey: string, body?: unknown, key?: string) {
  const response = await fetch(`${setup.base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${apiKey}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(key ? { 'idempotency-key': key } : {}),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

function withdrawalBody(amountMinor: bigint) {
  const withdrawalId = uniqueId('wd');
  return {
    withdrawalId,
    body: {
      withdrawalId,
      accountId: 'cust-7',
      asset: 'ETH',
      destination: evmAddress(),
      amountMinor: amountMinor.toString(),
    },
  };
}

async function submitRest(apiKey: string, amountMinor: bigint) {
  const { withdrawalId, body } = withdrawalBody(amountMinor);
  return rest('POST', '/v1/withdrawals', apiKey, body, `withdrawal-${withdrawalId}`);
}

interface Detail {
  operation: { payloadHash: string; requester: string; state: string };
}

async function decide(who: Who, operationId: string) {
  const detail = dataOf<Detail>(
    await call('staff.get', { session: await session('approver'), input: { operationId } }),
  );
  const answer = await call('staff.decide', {
    mutation: true,
    session: await session(who),
    input: { operationId, payloadHash: detail.operation.payloadHash, decision: 'approve' },
  });
  return { answer, detail };
}

describe('I31-KEYS API keys with scopes, owners and expiry', () => {
  it('I31-KEYS the admin who minted a key cannot approve the withdrawal submitted with it over REST; another staff member can', async () => {
    const minted = await mintKey('admin', { label: 'insider', scopes: ['withdraw', 'read'] });
    const submitted = await submitRest(minted.apiKey, 2n * ETH);
    expect(submitted.status).toBe(201);
    const operationId = (submitted.body.withdrawal as { operationId: string }).operationId;

    const self = await decide('admin', operationId);
    // The requester is the key, not a generic integrator.
    expect(self.detail.operation.requester).toBe(`apikey:${minted.keyId}`);
    expect(self.answer.status).toBe(403);
    expect(self.answer.body.error?.data.code).toBe('FORBIDDEN');
    expect(self.answer.body.error?.data.detail).toContain(minted.keyId);

    const other = await decide('approver', operationId);
    expect(other.answer.status).toBe(200);
    expect(dataOf<{ state: string }>(other.answer).state).toBe('APPROVED');
  });

  it('I31-KEYS the admin who last widened a key to withdraw cannot approve what it submits; its creator cannot either', async () => {
    const minted = await mintKey('admin', { label: 'read only', scopes: ['read'] });
    expect((await listedKey(minted.keyId))?.createdBy).toMatch(/^staff:/);
    const widened = await call('staffConfig.setApiKeyScopes', {
      mutation: true,
      session: await session('admin2'),
      input: { keyId: minted.keyId, scopes: ['read', 'withdraw'] },
    });
    expect(widened.status).toBe(200);
    const { proposalId } = dataOf<{ proposalId: string }>(widened);
    await approveAndApply(setup.database.db, setup.tenant.tenantId, call, await session('admin'), proposalId);
    const listed = await listedKey(minted.keyId);
    expect(listed?.scopes.sort()).toEqual(['read', 'withdraw']);
    expect(listed?.widenedBy).toMatch(/^staff:/);
    expect(listed?.widenedBy).not.toBe(listed?.createdBy);

    const submitted = await submitRest(minted.apiKey, 2n * ETH);
    expect(submitted.status).toBe(201);
    const operationId = (submitted.body.withdrawal as { operationId: string }).operationId;
    for (const who of ['admin2', 'admin'] as const) {
      const refused = await decide(who, operationId);
      expect(refused.answer.status, who).toBe(403);
      expect(refused.answer.body.error?.data.code).toBe('FORBIDDEN');
    }
    expect((await decide('approver', operationId)).answer.status).toBe(200);
  });

  it('I31-KEYS a key without the withdraw scope cannot withdraw, and the refusal names the scope and leaks nothing', async () => {
    const readOnly = await mintKey('admin', { label: 'reporting', scopes: ['read'] });
    const { withdrawalId, body } = withdrawalBody(ETH / 10n);
    const refused = await rest(
      'POST',
      '/v1/withdrawals',
      readOnly.apiKey,
      body,
      `withdrawal-${withdrawalId}`,
    );
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('FORBIDDEN');
    expect(String(refused.body.detail)).toContain('withdraw');
    expect(refused.body).not.toHaveProperty('withdrawal');

    // The bulk API and the tRPC face are the same procedure's scope.
    const bulk = await rest('POST', '/v1/withdrawal-batches', readOnly.apiKey, {
      items: [{ request: body, idempotencyKey: `withdrawal-${withdrawalId}` }],
    });
    expect(bulk.status).toBe(403);
    const trpc = await fetch(`${setup.base}/trpc/withdrawals.submit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${readOnly.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ request: body, idempotencyKey: `withdrawal-${withdrawalId}` }),
    });
    expect(trpc.status).toBe(403);
    await trpc.body?.cancel();

    // Nothing was written, and the read scope still reads.
    expect((await rest('GET', `/v1/withdrawals/${withdrawalId}`, readOnly.apiKey)).status).toBe(404);
    expect((await rest('GET', '/v1/assets', readOnly.apiKey)).status).toBe(200);
    const session = await rest('POST', '/v1/customer-sessions', readOnly.apiKey, { accountId: 'cust-7' });
    expect(session.status).toBe(403);
    expect(String(session.body.detail)).toContain('customer-sessions');
    expect(session.body).not.toHaveProperty('url');

    // Through the SDK: a typed refusal naming the scope, not retried.
    const sdk = createIdemClient({ baseUrl: setup.base, apiKey: readOnly.apiKey });
    const typed = await sdk.withdrawals
      .submit(body, withdrawalKey(withdrawalId))
      .catch((error: unknown) => error);
    expect(typed).toBeInstanceOf(IdemApiError);
    expect((typed as IdemApiError).isForbidden).toBe(true);
    expect((typed as IdemApiError).missingScope).toBe('withdraw');

    // A withdraw-only key reads nothing.
    const writer = await mintKey('admin', { label: 'writer', scopes: ['withdraw'] });
    const read = await rest('GET', '/v1/withdrawals', writer.apiKey);
    expect(read.status).toBe(403);
    expect(String(read.body.detail)).toContain('read');
    expect(read.body).not.toHaveProperty('items');
  });

  it('I31-KEYS a key past its expiry is refused like a revoked one, even while the key cache holds it', async () => {
    const expiresAt = new Date(Date.now() + 3_000).toISOString();
    const shortLived = await mintKey('admin', { label: 'short', scopes: ['read'], expiresAt });
    expect((await listedKey(shortLived.keyId))?.expiresAt).toBe(expiresAt);
    // Used once, so this server's cache holds it for a minute.
    expect((await rest('GET', '/v1/assets', shortLived.apiKey)).status).toBe(200);
    await expect
      .poll(async () => (await rest('GET', '/v1/assets', shortLived.apiKey)).status, { timeout: 15_000 })
      .toBe(401);
    const refused = await rest('GET', '/v1/assets', shortLived.apiKey);
    expect(refused.body.code).toBe('UNAUTHORIZED');
    expect(refused.body).not.toHaveProperty('assets');

    // An expiry in the past is refused when minting.
    const past = await call('staffConfig.createApiKey', {
      mutation: true,
      session: await session('admin'),
      input: { label: 'stale', scopes: ['read'], expiresAt: new Date(Date.now() - 60_000).toISOString() },
    });
    expect(past.body.error?.data.code).toBe('VALIDATION');
  });

  it('I31-KEYS every REST route refuses a key without its documented scope, naming it, before reading its input', async () => {
    const all = ['withdraw', 'customer-sessions', 'read', 'webhooks'];
    const lacking = new Map<string, string>();
    for (const scope of new Set(restRoutes.map((route) => route.scope))) {
      const key = await mintKey('admin', { label: `no ${scope}`, scopes: all.filter((s) => s !== scope) });
      lacking.set(scope, key.apiKey);
    }
    for (const route of restRoutes) {
      const path = route.path.replace(/\{[a-zA-Z]+\}/g, 'x');
      const apiKey = lacking.get(route.scope) ?? '';
      const answer = await rest(route.method, path, apiKey, route.method === 'POST' ? {} : undefined, 'k-1');
      expect(answer.status, `${route.method} ${route.path}`).toBe(403);
      expect(answer.body.missingScope, `${route.method} ${route.path}`).toBe(route.scope);
    }
  });
});
