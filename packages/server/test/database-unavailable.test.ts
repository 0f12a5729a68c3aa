/**
 * I16: while the database is lost (a primary died, a standby answers, the connection broke) the
 * server answers a typed, retryable UNAVAILABLE, never INTERNAL, and never a definitive failure for
 * a creation whose commit outcome it does not know. Real PostgreSQL behind a TCP proxy the test cuts.
 */

import { createIdemClient, IdemApiError, withdrawalKey } from '@idem/sdk';
import { onPostgres } from '@idem/testing/database';
import type { ServerProcess } from '@idem/testing/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PgProxy } from './support/pg-proxy.ts';
import { ETH, type TenantFixture, withdrawalBody } from './support/provision.ts';
import { type ProxiedServer, startProxiedServer } from './support/proxied-server.ts';
import { restClient } from './support/rest.ts';

function request() {
  return withdrawalBody({ amountMinor: (ETH / 1000n).toString() });
}

describe.skipIf(!onPostgres)('I16-UNAVAILABLE the database goes away under a running server', () => {
  let fixture: ProxiedServer;
  let proxy: PgProxy;
  let server: ServerProcess;
  let tenant: TenantFixture;

  beforeAll(async () => {
    fixture = await startProxiedServer();
    ({ proxy, server, tenant } = fixture);
  });
  afterAll(() => fixture?.stop());

  const operationsWithKey = (key: string) => fixture.operationsWithKey(key);

  it('I16-UNAVAILABLE a submission while the database is unreachable is 503 UNAVAILABLE with Retry-After on REST and retryAfterMs on tRPC; the SDK retries with the same key and creates exactly one', async () => {
    const { call } = await restClient(server.baseUrl);
    const warm = request();
    const warmed = await call('POST', '/v1/withdrawals', {
      apiKey: tenant.apiKey,
      body: warm,
      headers: { 'idempotency-key': withdrawalKey(warm.withdrawalId) },
    });
    expect(warmed.status).toBe(201);

    await proxy.cut();
    const body = request();
    const key = withdrawalKey(body.withdrawalId);
    const refused = await call('POST', '/v1/withdrawals', {
      apiKey: tenant.apiKey,
      body,
      headers: { 'idempotency-key': key },
    });
    expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    expect(refused.body).toMatchObject({ code: 'UNAVAILABLE', status: 503 });
    expect(refused.body.retryAfterMs).toBeGreaterThan(0);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The outcome of this creation is not known to the server: the answer must not say it failed.
    expect(String(refused.body.detail)).toMatch(/retry with the same key/i);

    const once = createIdemClient({
      baseUrl: server.baseUrl,
      apiKey: tenant.apiKey,
      retry: { attemptsMax: 1 },
    });
    const trpcRefusal = await once.withdrawals.submit(body, key).catch((error: unknown) => error);
    expect(trpcRefusal).toBeInstanceOf(IdemApiError);
    expect((trpcRefusal as IdemApiError).code).toBe('UNAVAILABLE');
    expect((trpcRefusal as IdemApiError).status).toBe(503);
    expect((trpcRefusal as IdemApiError).isRetryable).toBe(true);
    expect((trpcRefusal as IdemApiError).problem.retryAfterMs).toBeGreaterThan(0);

    // The SDK keeps retrying with the same key; the database comes back while it does.
    const patient = createIdemClient({
      baseUrl: server.baseUrl,
      apiKey: tenant.apiKey,
      retry: { attemptsMax: 20, totalMsMax: 60_000 },
    });
    // Fixed: the outage's length, a fault's schedule rather than a wait. The test waits on the SDK,
    // which backs off retryAfterMs (2 s) between attempts, so the database returns during its wait.
    const restored = new Promise((resolve) => setTimeout(resolve, 1_500)).then(() => proxy.restore());
    const result = await patient.withdrawals.submit(body, key);
    await restored;
    expect(['CREATED', 'REPLAYED']).toContain(result.outcome);
    expect(await operationsWithKey(key)).toHaveLength(1);
  });

  it('I16-UNAVAILABLE I16-F4 the reply to a committed creation is lost: the answer is UNAVAILABLE, not a failure, and the retry with the same key replays the one operation', async () => {
    await proxy.restore();
    const { call } = await restClient(server.baseUrl);
    const body = request();
    const key = withdrawalKey(body.withdrawalId);
    proxy.loseReplyAfter(key);
    const unknown = await call('POST', '/v1/withdrawals', {
      apiKey: tenant.apiKey,
      body,
      headers: { 'idempotency-key': key },
    });
    expect(proxy.lostReplies).toBe(1);
    expect(unknown.status, JSON.stringify(unknown.body)).toBe(503);
    expect(unknown.body).toMatchObject({ code: 'UNAVAILABLE' });
    // It did commit: the server could not know, and said so.
    const stored = await operationsWithKey(key);
    expect(stored).toHaveLength(1);

    const retried = await call('POST', '/v1/withdrawals', {
      apiKey: tenant.apiKey,
      body,
      headers: { 'idempotency-key': key },
    });
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ outcome: 'REPLAYED' });
    expect((retried.body.withdrawal as { operationId: string }).operationId).toBe(stored[0]?.operation_id);
    expect(await operationsWithKey(key)).toHaveLength(1);
  });
});
