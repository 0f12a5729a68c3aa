import { type Database, submitWithdrawal, withTenant } from '@idem/core';
import { withdrawalKey } from '@idem/sdk';
import { strandWithdrawal } from '@idem/testing/tenants';
import { describe, expect, it } from 'vitest';
import { backendKinds, provisionTenant, type TenantFixture, withdrawalBody } from './support/provision.ts';
import { type RestAnswer, restClient } from './support/rest.ts';
import { serveForTests } from './support/served.ts';

const request = withdrawalBody;

/** A problem document as RFC 9457 and our contract say: the code, the status, the request id. */
function expectProblem(answer: RestAnswer, status: number, code: string): void {
  expect(answer.status, JSON.stringify(answer.body)).toBe(status);
  expect(answer.headers.get('content-type')).toBe('application/problem+json');
  expect(answer.body).toMatchObject({ code, status });
  expect(answer.body.requestId).toBe(answer.headers.get('x-request-id'));
}

interface Fixtures {
  a: TenantFixture;
  b: TenantFixture;
  poor: TenantFixture;
  /** A withdrawal of tenant a whose send timed out: UNKNOWN, funds held. */
  inFlight: { request: ReturnType<typeof request>; key: string };
}

async function provision(db: Database): Promise<Fixtures> {
  const a = await provisionTenant(db, { name: 'Exchange A' });
  const b = await provisionTenant(db, { name: 'Exchange B' });
  const poor = await provisionTenant(db, {
    name: 'Exchange Poor',
    fund: [{ accountId: 'cust-7', asset: 'ETH', amountMinor: '1000' }],
  });
  const stuck = request({ amountMinor: '7' });
  const key = withdrawalKey(stuck.withdrawalId);
  const { operation } = await submitWithdrawal(db, {
    tenantId: a.tenantId,
    request: stuck,
    idempotencyKey: key,
  });
  await withTenant(db, a.tenantId, (tx) => strandWithdrawal(tx, operation, 'UNKNOWN'));
  return { a, b, poor, inFlight: { request: stuck, key } };
}

describe.each(backendKinds)('I15 the REST face (%s)', (kind) => {
  const served = serveForTests({ kind, provision, env: { IDEM_RATE_LIMIT_PER_SECOND: '10000' } });
  const rest = () => restClient(served.server.baseUrl);

  it('I15 C03 201 on creation, 200 with Idempotent-Replayed on a replay of the same key and payload', async () => {
    const { call } = await rest();
    const { a } = served.fixtures;
    const body = request();
    const key = withdrawalKey(body.withdrawalId);
    const created = await call('POST', '/v1/withdrawals', {
      apiKey: a.apiKey,
      body,
      headers: { 'idempotency-key': key },
    });
    expect(created.status).toBe(201);
    expect(created.headers.get('idempotent-replayed')).toBeNull();
    expect(created.headers.get('location')).toBe(`/v1/withdrawals/${body.withdrawalId}`);
    expect(created.body).toMatchObject({ outcome: 'CREATED', withdrawal: { state: 'REQUESTED' } });

    const replayed = await call('POST', '/v1/withdrawals', {
      apiKey: a.apiKey,
      body,
      headers: { 'idempotency-key': key },
    });
    expect(replayed.status).toBe(200);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.body).toMatchObject({ outcome: 'REPLAYED' });
    expect((replayed.body.withdrawal as { operationId: string }).operationId).toBe(
      (created.body.withdrawal as { operationId: string }).operationId,
    );
  });

  it('I15 C03 422 when the key was used with another payload; C04 409 naming holderKey for a second key', async () => {
    const { call } = await rest();
    const { a } = served.fixtures;
    const body = request();
    const key = withdrawalKey(body.withdrawalId);
    await call('POST', '/v1/withdrawals', { apiKey: a.apiKey, body, headers: { 'idempotency-key': key } });

    const changed = await call('POST', '/v1/withdrawals', {
      apiKey: a.apiKey,
      body: { ...body, amountMinor: '12345' },
      headers: { 'idempotency-key': key },
    });
    expectProblem(changed, 422, 'IDEMPOTENCY_CONFLICT');
    expect(changed.body.holderKey).toBeUndefined();

    const second = await call('POST', '/v1/withdrawals', {
      apiKey: a.apiKey,
      body,
      headers: { 'idempotency-key': `${key}-retry` },
    });
    expectProblem(second, 409, 'IDEMPOTENCY_CONFLICT');
    expect(second.body.holderKey).toBe(key);
    // seed 004: the refused key left no trace; the holder's key shows the withdrawal.
    expectProblem(
      await call('GET', '/v1/idempotency-keys/{key}', { apiKey: a.apiKey, params: { key: `${key}-retry` } }),
      404,
      'NOT_FOUND',
    );
    const held = await call('GET', '/v1/idempotency-keys/{key}', { apiKey: a.apiKey, params: { key } });
    expect(held.status).toBe(200);
    expect(held.body).toMatchObject({ reference: body.withdrawalId, kind: 'withdrawal' });
  });

  it('I15 400 without the Idempotency-Key header, with a malformed one, or one the body contradicts', async () => {
    const { call } = await rest();
    const { a } = served.fixtures;
    const body = request();
    const key = withdrawalKey(body.withdrawalId);
    expectProblem(await call('POST', '/v1/withdrawals', { apiKey: a.apiKey, body }), 400, 'VALIDATION');
    // A key only in the body is not enough on the REST face: the header is the contract.
    expectProblem(
      await call('POST', '/v1/withdrawals', { apiKey: a.apiKey, body: { ...body, idempotencyKey: key } }),
      400,
      'VALIDATION',
    );
    expectProblem(
      await call('POST', '/v1/withdrawals', {
        apiKey: a.apiKey,
        body,
        headers: { 'idempotency-key': 'has a space' },
      }),
      400,
      'VALIDATION',
    );
    expectProblem(
      await call('POST', '/v1/withdrawals', {
        apiKey: a.apiKey,
        body: { ...body, idempotencyKey: `${key}-other` },
        headers: { 'idempotency-key': key },
      }),
      400,
      'VALIDATION',
    );
    const agreeing = await call('POST', '/v1/withdrawals', {
      apiKey: a.apiKey,
      body: { ...body, idempotencyKey: key },
      headers: { 'idempotency-key': key },
    });
    expect(agreeing.status).toBe(201);
    // Malformed JSON and a bad amount are 400 too, and write nothing.
    expectProblem(
      await call('POST', '/v1/withdrawals', {
        apiKey: a.apiKey,
        body: '{"withdrawalId":',
        headers: { 'idempotency-key': 'withdrawal-json' },
      }),
      400,
      'VALIDATION',
    );
    const bad = request({ amountMinor: '1.5' });
    expectProblem(
      await call('POST', '/v1/withdrawals', {
        apiKey: a.apiKey,
        body: bad,
        headers: { 'idempotency-key': withdrawalKey(bad.withdrawalId) },
      }),
      400,
      'VALIDATION',
    );
    expectProblem(
      await call('GET', '/v1/withdrawals/{withdrawalId}', {
        apiKey: a.apiKey,
        params: { withdrawalId: bad.withdrawalId },
      }),
      404,
      'NOT_FOUND',
    );
  });

  it('I15 C05 409 with Retry-After while the outcome is UNKNOWN; C03 a stored INSUFFICIENT_FUNDS replays as 422', async () => {
    const { call } = await rest();
    const { a, poor, inFlight } = served.fixtures;
    const stuck = await call('POST', '/v1/withdrawals', {
      apiKey: a.apiKey,
      body: inFlight.request,
      headers: { 'idempotency-key': inFlight.key },
    });
    expectProblem(stuck, 409, 'IN_FLIGHT');
    expect(stuck.headers.get('retry-after')).toBe('5');
    expect(stuck.body.retryAfterMs).toBe(5000);

    const body = request({ amountMinor: '5000' });
    const key = withdrawalKey(body.withdrawalId);
    for (let attempt = 0; attempt < 2; attempt++) {
      expectProblem(
        await call('POST', '/v1/withdrawals', {
          apiKey: poor.apiKey,
          body,
          headers: { 'idempotency-key': key },
        }),
        422,
        'INSUFFICIENT_FUNDS',
      );
    }
  });

  it('I15 C01 reads: by id, by key, lists with a cursor, balances, assets, deposits; another tenant sees 404', async () => {
    const { call } = await rest();
    const { a, b } = served.fixtures;
    const body = request();
    const key = withdrawalKey(body.withdrawalId);
    await call('POST', '/v1/withdrawals', { apiKey: a.apiKey, body, headers: { 'idempotency-key': key } });

    const byId = await call('GET', '/v1/withdrawals/{withdrawalId}', {
      apiKey: a.apiKey,
      params: { withdrawalId: body.withdrawalId },
    });
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({ reference: body.withdrawalId, custodianTransferId: null });
    expectProblem(
      await call('GET', '/v1/withdrawals/{withdrawalId}', {
        apiKey: b.apiKey,
        params: { withdrawalId: body.withdrawalId },
      }),
      404,
      'NOT_FOUND',
    );
    expectProblem(
      await call('GET', '/v1/idempotency-keys/{key}', { apiKey: b.apiKey, params: { key } }),
      404,
      'NOT_FOUND',
    );

    const first = await call('GET', '/v1/withdrawals', {
      apiKey: a.apiKey,
      query: { state: 'REQUESTED', limit: '1' },
    });
    expect(first.status).toBe(200);
    expect(first.body.items).toHaveLength(1);
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const next = await call('GET', '/v1/withdrawals', {
      apiKey: a.apiKey,
      query: { state: 'REQUESTED', limit: '1', cursor: String(first.body.nextCursor) },
    });
    expect(next.status).toBe(200);
    expect(next.body.items).not.toEqual(first.body.items);
    expectProblem(
      await call('GET', '/v1/withdrawals', { apiKey: a.apiKey, query: { limit: 'many' } }),
      400,
      'VALIDATION',
    );
    expectProblem(
      await call('GET', '/v1/withdrawals', { apiKey: a.apiKey, query: { colour: 'red' } }),
      400,
      'VALIDATION',
    );

    const balances = await call('GET', '/v1/accounts/{accountId}/balances', {
      apiKey: a.apiKey,
      params: { accountId: 'cust-7' },
    });
    expect(balances.status).toBe(200);
    expect(balances.body).toEqual(expect.arrayContaining([expect.objectContaining({ asset: 'ETH' })]));
    expect((await call('GET', '/v1/assets', { apiKey: a.apiKey })).status).toBe(200);
    const deposits = await call('GET', '/v1/deposits', { apiKey: a.apiKey, query: { accountId: 'cust-7' } });
    expect(deposits.status).toBe(200);
    expect(deposits.body.items).toHaveLength(1);
    expect(deposits.body).toMatchObject({ items: [{ kind: 'deposit', accountId: 'cust-7' }] });

    const session = await call('POST', '/v1/customer-sessions', {
      apiKey: a.apiKey,
      body: { accountId: 'cust-7', expiresInSeconds: 60 },
    });
    expect(session.status).toBe(201);
    expect(String(session.body.url)).toContain('/customer/start#');
  });

  it('I15 401 without or with an unknown API key; 404 for an unknown route; 405 for a wrong method', async () => {
    const { call } = await rest();
    expectProblem(await call('GET', '/v1/assets', {}), 401, 'UNAUTHORIZED');
    expectProblem(await call('GET', '/v1/assets', { apiKey: 'idem_not-a-key' }), 401, 'UNAUTHORIZED');
    const unknown = await fetch(`${served.server.baseUrl}/v1/nothing-here`);
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toBe('application/problem+json');
    const wrongMethod = await fetch(`${served.server.baseUrl}/v1/assets`, { method: 'DELETE' });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET');
  });

  it('I15 C23 the access log names the procedure, the outcome and the operation id, never the key or destination', async () => {
    const { call } = await rest();
    const { a } = served.fixtures;
    const body = request();
    const key = withdrawalKey(body.withdrawalId);
    const created = await call('POST', '/v1/withdrawals', {
      apiKey: a.apiKey,
      body,
      headers: { 'idempotency-key': key, 'x-request-id': `req-${body.withdrawalId}` },
    });
    await call('POST', '/v1/withdrawals', {
      apiKey: a.apiKey,
      body,
      headers: { 'idempotency-key': key, 'x-request-id': `req2-${body.withdrawalId}` },
    });
    await call('POST', '/v1/withdrawals', {
      apiKey: a.apiKey,
      body: { ...body, amountMinor: '3' },
      headers: { 'idempotency-key': key, 'x-request-id': `req3-${body.withdrawalId}` },
    });
    // The access line is the last a request writes (once its answer is sent): with all three there,
    // everything these requests logged is there, and the absences below are meaningful.
    const accessLines = () =>
      served.server.output
        .join('')
        .split('\n')
        .filter((line) => line.includes(body.withdrawalId.slice(3)) && line.includes('"msg":"request"'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    await expect.poll(() => accessLines().length, { timeout: 5_000, interval: 20 }).toBe(3);
    const lines = accessLines();
    const operationId = (created.body.withdrawal as { operationId: string }).operationId;
    expect(lines.map((line) => [line.procedure, line.outcome, line.operationId, line.status])).toEqual([
      ['withdrawals.submit', 'CREATED', operationId, 201],
      ['withdrawals.submit', 'REPLAYED', operationId, 200],
      ['withdrawals.submit', 'IDEMPOTENCY_CONFLICT', undefined, 422],
    ]);
    const everything = served.server.output.join('');
    expect(everything).not.toContain(key);
    expect(everything).not.toContain(body.destination);
    expect(everything).not.toContain(a.apiKey);
  });
});

describe('I15 the REST face keeps the tenant rate limit', () => {
  const served = serveForTests({
    provision: (db) => provisionTenant(db),
    env: { IDEM_RATE_LIMIT_PER_SECOND: '1' },
  });

  it('I15 429 with Retry-After and retryAfterMs once the tenant is over its budget', async () => {
    const { call } = await restClient(served.server.baseUrl);
    const answers: RestAnswer[] = [];
    for (let i = 0; i < 4; i++)
      answers.push(await call('GET', '/v1/assets', { apiKey: served.fixtures.apiKey }));
    const limited = answers.find((answer) => answer.status === 429);
    expect(limited?.body).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
    expect(Number(limited?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(limited?.body.retryAfterMs).toEqual(expect.any(Number));
  });
});
