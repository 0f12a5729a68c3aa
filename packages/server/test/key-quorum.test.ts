import { activeOutboundEndpoints, createStaffUser, withTenant } from '@idem/core';
import { makeControlChangeDue } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../src/auth/password.ts';
import { applyDue, approveControlChange } from './support/control-changes.ts';
import { ETH, evmAddress, provisionTenant, type TenantFixture, uniqueId } from './support/provision.ts';
import { dataOf, PASSWORD } from './support/staff-http.ts';
import { type TwoAdminsMember, twoAdminsTenant } from './support/two-admins.ts';

/**
 * Admin quorum: an API key, a widening of its scopes and an outbound webhook endpoint are loosenings.
 * In quorum mode one admin's request stores the key (its secret shown once) or the endpoint (its
 * signing secret shown once) inactive and proposes a control change; another admin approves; the
 * governance executor (the worker's step) applies it after the tenant's delay. Until then the key
 * authenticates nothing, the widening grants nothing, and the endpoint receives nothing. Revoking,
 * narrowing and disabling act at once. A tenant with one admin creates neither (FORBIDDEN).
 */
const DELAY_SECONDS = 2;

const setup = twoAdminsTenant({
  name: 'Key quorum',
  domain: 'kq.invalid',
  looseningDelaySeconds: DELAY_SECONDS,
  env: {
    // A one-second key cache: an applied widening reaches the server's cache within it (the worker
    // that applies it cannot tell the servers to forget the key; a late widening is the safe side).
    IDEM_API_KEY_CACHE_MS: '1000',
    IDEM_WEBHOOK_ALLOW_INTERNAL: '127.0.0.1',
  },
});
const { call, signIn, session } = setup;
type Who = TwoAdminsMember;
let lone: TenantFixture;

beforeAll(async () => {
  lone = await provisionTenant(setup.database.db, { name: 'Lone admin' });
  const passwordHash = await hashPassword(PASSWORD);
  await withTenant(setup.database.db, lone.tenantId, (tx) =>
    createStaffUser(tx, { tenantId: lone.tenantId, email: 'lone@kq.invalid', role: 'admin', passwordHash }),
  );
});

interface Proposed {
  outcome: 'APPLIED' | 'PROPOSED';
  proposalId: string | null;
  approvalsRequired: number | null;
}

const useKey = async (apiKey: string, path = '/v1/assets') => {
  const response = await fetch(`${setup.base}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
  await response.body?.cancel();
  return response.status;
};

async function submitWithdrawal(apiKey: string): Promise<number> {
  const withdrawalId = uniqueId('wd');
  const response = await fetch(`${setup.base}/v1/withdrawals`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': `withdrawal-${withdrawalId}`,
    },
    body: JSON.stringify({
      withdrawalId,
      accountId: 'cust-7',
      asset: 'ETH',
      destination: evmAddress(),
      amountMinor: (ETH / 100n).toString(),
    }),
  });
  await response.body?.cancel();
  return response.status;
}

async function decideAs(who: Who, proposalId: string) {
  const proposal = dataOf<{ payloadHash: string }>(
    await call('staffProposals.get', { session: await session('admin2'), input: { proposalId } }),
  );
  return call('staffProposals.decide', {
    mutation: true,
    session: await session(who),
    input: { proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
  });
}

/**
 * The tenant's delay passes (moved back on the database's clock rather than waited for), and the
 * executor applies the now due change.
 */
async function appliedAfterDelay(proposalId: string): Promise<void> {
  await makeControlChangeDue(setup.database.db, proposalId);
  const ran = await applyDue(setup.database.db, setup.tenant.tenantId);
  expect(ran.applied).toBeGreaterThanOrEqual(1);
}

async function mintActiveKey(scopes: string[]): Promise<{ keyId: string; apiKey: string }> {
  const created = dataOf<Proposed & { keyId: string; apiKey: string }>(
    await call('staffConfig.createApiKey', {
      mutation: true,
      session: await session('admin'),
      input: { label: 'mint', scopes },
    }),
  );
  await approveControlChange(call, await session('admin2'), created.proposalId ?? '');
  await appliedAfterDelay(created.proposalId ?? '');
  expect(await useKey(created.apiKey)).toBe(scopes.includes('read') ? 200 : 403);
  return created;
}

describe('I31-QUORUM API keys and outbound endpoints need another admin', () => {
  it('I31-QUORUM a key minted by one admin authenticates nothing until another admin approves and the delay passes; its minter cannot approve it', async () => {
    const created = dataOf<Proposed & { keyId: string; apiKey: string }>(
      await call('staffConfig.createApiKey', {
        mutation: true,
        session: await session('admin'),
        input: { label: 'payouts', scopes: ['withdraw', 'read'] },
      }),
    );
    // The secret is answered once, now; the key waits.
    expect(created.apiKey).toMatch(/^idem_[0-9a-f]{32}_/);
    expect(created).toMatchObject({ outcome: 'PROPOSED', approvalsRequired: 1 });
    expect(await useKey(created.apiKey)).toBe(401);
    expect(await submitWithdrawal(created.apiKey)).toBe(401);
    const listed = dataOf<{ keyId: string; activatedAt: string | null }[]>(
      await call('staffConfig.apiKeys', { session: await session('admin') }),
    ).find((key) => key.keyId === created.keyId);
    expect(listed?.activatedAt).toBeNull();

    const own = await decideAs('admin', created.proposalId ?? '');
    expect(own.body.error?.data.code).toBe('FORBIDDEN');
    // An approver (not an admin) does not decide control changes either.
    expect((await decideAs('approver', created.proposalId ?? '')).body.error?.data.code).toBe('FORBIDDEN');

    await approveControlChange(call, await session('admin2'), created.proposalId ?? '');
    // Approved, but the delay has not passed: still refused, and the executor has nothing due.
    expect(await useKey(created.apiKey)).toBe(401);
    expect((await applyDue(setup.database.db, setup.tenant.tenantId)).applied).toBe(0);
    await appliedAfterDelay(created.proposalId ?? '');
    expect(await useKey(created.apiKey)).toBe(200);
    expect(await submitWithdrawal(created.apiKey)).toBe(201);
  });

  it('I31-QUORUM the database activates a key only through an approved, due control change naming it', async () => {
    const created = dataOf<Proposed & { keyId: string; apiKey: string }>(
      await call('staffConfig.createApiKey', {
        mutation: true,
        session: await session('admin'),
        input: { label: 'by hand', scopes: ['read'] },
      }),
    );
    const byHand = withTenant(setup.database.db, setup.tenant.tenantId, (tx) =>
      tx.execute(sql`update api_keys set activated_at = now() where key_id = ${created.keyId}`),
    );
    const refused = await byHand.then(
      () => null,
      (error: unknown) => String((error as { cause?: unknown }).cause ?? error),
    );
    expect(refused).toContain('activated only by an approved, due control change');
    expect(await useKey(created.apiKey)).toBe(401);
  });

  it('I31-QUORUM widening a key is proposed and grants nothing until approved; narrowing and revoking act at once', async () => {
    const key = await mintActiveKey(['read']);
    expect(await submitWithdrawal(key.apiKey)).toBe(403);
    const widened = dataOf<Proposed & { widened: boolean; scopes: string[] }>(
      await call('staffConfig.setApiKeyScopes', {
        mutation: true,
        session: await session('admin'),
        input: { keyId: key.keyId, scopes: ['read', 'withdraw'] },
      }),
    );
    expect(widened).toMatchObject({ outcome: 'PROPOSED', widened: false, scopes: ['read'] });
    expect(await submitWithdrawal(key.apiKey)).toBe(403);
    expect((await decideAs('admin', widened.proposalId ?? '')).body.error?.data.code).toBe('FORBIDDEN');
    await approveControlChange(call, await session('admin2'), widened.proposalId ?? '');
    expect(await submitWithdrawal(key.apiKey)).toBe(403);
    await appliedAfterDelay(widened.proposalId ?? '');
    await expect.poll(() => submitWithdrawal(key.apiKey), { timeout: 5_000 }).toBe(201);
    const listed = dataOf<{ keyId: string; scopes: string[]; widenedBy: string | null; createdBy: string }[]>(
      await call('staffConfig.apiKeys', { session: await session('admin') }),
    ).find((row) => row.keyId === key.keyId);
    // The proposer is the widener four eyes refuses, as before.
    expect(listed?.scopes).toEqual(['withdraw', 'read']);
    expect(listed?.widenedBy).toBe(listed?.createdBy);

    // Narrowing: at once, by one admin.
    const narrowed = dataOf<Proposed & { widened: boolean; scopes: string[] }>(
      await call('staffConfig.setApiKeyScopes', {
        mutation: true,
        session: await session('admin'),
        input: { keyId: key.keyId, scopes: ['read'] },
      }),
    );
    expect(narrowed).toMatchObject({ outcome: 'APPLIED', scopes: ['read'] });
    expect(await submitWithdrawal(key.apiKey)).toBe(403);
    // Revoking: at once.
    const revoked = await call('staffConfig.revokeApiKey', {
      mutation: true,
      session: await session('admin'),
      input: { keyId: key.keyId },
    });
    expect(revoked.status).toBe(200);
    expect(await useKey(key.apiKey)).toBe(401);
  });

  it('I31-QUORUM a key revoked while its creation waits is never activated', async () => {
    const created = dataOf<Proposed & { keyId: string; apiKey: string }>(
      await call('staffConfig.createApiKey', {
        mutation: true,
        session: await session('admin'),
        input: { label: 'withdrawn', scopes: ['read'] },
      }),
    );
    await approveControlChange(call, await session('admin2'), created.proposalId ?? '');
    const revoked = await call('staffConfig.revokeApiKey', {
      mutation: true,
      session: await session('admin'),
      input: { keyId: created.keyId },
    });
    expect(revoked.status).toBe(200);
    // The delay passes (moved back on the database's clock): the executor refuses the creation.
    await makeControlChangeDue(setup.database.db, created.proposalId ?? '');
    const ran = await applyDue(setup.database.db, setup.tenant.tenantId);
    expect(ran.refused).toBeGreaterThanOrEqual(1);
    expect(await useKey(created.apiKey)).toBe(401);
  });

  it('I31-QUORUM an outbound endpoint added by one admin receives nothing until another admin approves; disabling acts at once', async () => {
    const created = dataOf<Proposed & { endpointId: string; secret: string }>(
      await call('staffConfig.createOutboundEndpoint', {
        mutation: true,
        session: await session('admin'),
        input: { url: 'http://127.0.0.1:9/quorum' },
      }),
    );
    expect(created.secret).toMatch(/^whsec_/);
    expect(created).toMatchObject({ outcome: 'PROPOSED', approvalsRequired: 1 });
    const delivered = async () =>
      (
        await withTenant(setup.database.db, setup.tenant.tenantId, (tx) =>
          activeOutboundEndpoints(tx, setup.tenant.tenantId),
        )
      ).map((endpoint) => endpoint.endpointId);
    expect(await delivered()).not.toContain(created.endpointId);
    const listed = dataOf<{ outbound: { endpointId: string; activatedAt: string | null }[] }>(
      await call('staffConfig.endpoints', { session: await session('admin') }),
    ).outbound.find((row) => row.endpointId === created.endpointId);
    expect(listed?.activatedAt).toBeNull();

    expect((await decideAs('admin', created.proposalId ?? '')).body.error?.data.code).toBe('FORBIDDEN');
    await approveControlChange(call, await session('admin2'), created.proposalId ?? '');
    expect(await delivered()).not.toContain(created.endpointId);
    await appliedAfterDelay(created.proposalId ?? '');
    expect(await delivered()).toContain(created.endpointId);

    const disabled = await call('staffConfig.disableEndpoint', {
      mutation: true,
      session: await session('admin'),
      input: { direction: 'outbound', endpointId: created.endpointId },
    });
    expect(disabled.status).toBe(200);
    expect(await delivered()).not.toContain(created.endpointId);
  });

  it('I31-QUORUM the database activates an outbound endpoint only through an approved, due control change naming it', async () => {
    const created = dataOf<Proposed & { endpointId: string }>(
      await call('staffConfig.createOutboundEndpoint', {
        mutation: true,
        session: await session('admin'),
        input: { url: 'http://127.0.0.1:9/by-hand' },
      }),
    );
    const refused = await withTenant(setup.database.db, setup.tenant.tenantId, (tx) =>
      tx.execute(
        sql`update outbound_endpoints set activated_at = now() where endpoint_id = ${created.endpointId}`,
      ),
    ).then(
      () => null,
      (error: unknown) => String((error as { cause?: unknown }).cause ?? error),
    );
    expect(refused).toContain('activated only by an approved, due control change');
    const active = await withTenant(setup.database.db, setup.tenant.tenantId, (tx) =>
      activeOutboundEndpoints(tx, setup.tenant.tenantId),
    );
    expect(active.map((endpoint) => endpoint.endpointId)).not.toContain(created.endpointId);
  });

  it('I31-QUORUM an endpoint refused by the egress policy is refused when proposed, and nothing is stored', async () => {
    const refused = await call('staffConfig.createOutboundEndpoint', {
      mutation: true,
      session: await session('admin'),
      input: { url: 'https://10.0.0.8/hooks' },
    });
    expect(refused.body.error?.data.code).toBe('VALIDATION');
  });

  it('I31-QUORUM a tenant with one admin mints no key and adds no endpoint from the screens (FORBIDDEN), nothing stored', async () => {
    const admin = await signIn({ tenantId: lone.tenantId, email: 'lone@kq.invalid', password: PASSWORD });
    const key = await call('staffConfig.createApiKey', {
      mutation: true,
      session: admin,
      input: { label: 'alone', scopes: ['withdraw'] },
    });
    expect(key.body.error?.data.code).toBe('FORBIDDEN');
    const endpoint = await call('staffConfig.createOutboundEndpoint', {
      mutation: true,
      session: admin,
      input: { url: 'http://127.0.0.1:9/alone' },
    });
    expect(endpoint.body.error?.data.code).toBe('FORBIDDEN');
    const keys = dataOf<{ label: string }[]>(await call('staffConfig.apiKeys', { session: admin }));
    expect(keys.map((k) => k.label)).not.toContain('alone');
    const endpoints = dataOf<{ outbound: unknown[] }>(
      await call('staffConfig.endpoints', { session: admin }),
    );
    expect(endpoints.outbound).toEqual([]);
  });
});
