import { schema, withTenant } from '@idem/core';

const { operations } = schema;

import { createIdemClient, IdemApiError, type IdemClient, withdrawalKey } from '@idem/sdk';
import { type ServerProcess, startServerProcess } from '@idem/testing/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Backend,
  backendKinds,
  createBackend,
  disposeBackend,
  ETH,
  evmAddress,
  provisionTenant,
  type TenantFixture,
  uniqueId,
  withDirectDatabase,
} from './support/provision.ts';

async function refusal(promise: Promise<unknown>): Promise<IdemApiError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof IdemApiError) return error;
    throw error;
  }
  throw new Error('expected a refusal, but the call succeeded');
}

function request(overrides: Record<string, unknown> = {}) {
  return {
    withdrawalId: uniqueId('wd'),
    accountId: 'cust-7',
    asset: 'ETH',
    network: 'ethereum' as const,
    destination: evmAddress(),
    amountMinor: (ETH / 100n).toString(),
    ...overrides,
  };
}

/**
 * The API as an integrator meets it: the real server in a child process, driven through the SDK,
 * on the embedded database and on PostgreSQL.
 */
describe.each(backendKinds)('contract over HTTP through the SDK (%s)', (kind) => {
  let backend: Backend;
  let server: ServerProcess;
  let a: TenantFixture;
  let b: TenantFixture;
  let poor: TenantFixture;
  let idemA: IdemClient;
  let idemB: IdemClient;

  beforeAll(async () => {
    backend = await createBackend(kind);
    await withDirectDatabase(backend, async (db) => {
      a = await provisionTenant(db, { name: 'Exchange A' });
      b = await provisionTenant(db, { name: 'Exchange B' });
      poor = await provisionTenant(db, {
        name: 'Exchange Poor',
        fund: [{ accountId: 'cust-7', asset: 'ETH', amountMinor: '1000' }],
      });
    });
    server = await startServerProcess(backend.env);
    idemA = createIdemClient({ baseUrl: server.baseUrl, apiKey: a.apiKey });
    idemB = createIdemClient({ baseUrl: server.baseUrl, apiKey: b.apiKey });
  });
  afterAll(async () => {
    await server?.stop();
    if (backend) await disposeBackend(backend);
  });

  it('C03 100 concurrent submissions of one key create exactly one withdrawal', async () => {
    const req = request();
    const key = withdrawalKey(req.withdrawalId);
    const results = await Promise.all(Array.from({ length: 100 }, () => idemA.withdrawals.submit(req, key)));
    expect(results.filter((r) => r.outcome === 'CREATED')).toHaveLength(1);
    expect(new Set(results.map((r) => r.withdrawal.operationId)).size).toBe(1);
    const page = await idemA.withdrawals.list({ limit: 100 });
    expect(page.items.filter((item) => item.reference === req.withdrawalId)).toHaveLength(1);
    const eth = (await idemA.balances.get('cust-7')).find((balance) => balance.asset === 'ETH');
    expect(BigInt(eth?.held ?? '0')).toBe(ETH / 100n);
  });

  it('C01 a second tenant with the same key gets its own withdrawal and never sees the first', async () => {
    const req = request();
    const key = withdrawalKey(req.withdrawalId);
    const first = await idemA.withdrawals.submit(req, key);
    const second = await idemB.withdrawals.submit(req, key);
    expect(second.outcome).toBe('CREATED');
    expect(second.withdrawal.operationId).not.toBe(first.withdrawal.operationId);

    const onlyA = request();
    await idemA.withdrawals.submit(onlyA, withdrawalKey(onlyA.withdrawalId));
    const notFound = await refusal(idemB.withdrawals.get(onlyA.withdrawalId));
    expect(notFound.code).toBe('NOT_FOUND');
    expect(notFound.status).toBe(404);
  });

  it('C04 a second key for a claimed withdrawal id is refused, names the holder and leaves no trace', async () => {
    const req = request();
    const holderKey = withdrawalKey(req.withdrawalId);
    await idemA.withdrawals.submit(req, holderKey);
    const before = await idemA.withdrawals.list({ limit: 100 });
    const conflict = await refusal(idemA.withdrawals.submit(req, `${holderKey}-retry`));
    expect(conflict.isIdempotencyConflict).toBe(true);
    expect(conflict.status).toBe(409);
    expect(conflict.problem.holderKey).toBe(holderKey);
    const withdrawal = await idemA.withdrawals.get(req.withdrawalId);
    expect(withdrawal.reference).toBe(req.withdrawalId);
    // No trace, seen through the API on both backends, and in the table where it can be read live.
    const after = await idemA.withdrawals.list({ limit: 100 });
    expect(after.items.map((item) => item.operationId)).toEqual(before.items.map((item) => item.operationId));
    await withDirectDatabaseWhenShared(async (db) => {
      const rows = await withTenant(db, a.tenantId, (tx) => tx.select().from(operations));
      expect(rows.filter((row) => row.idempotencyKey === `${holderKey}-retry`)).toEqual([]);
    });
  });

  it('C03 a changed amount under one key is refused, never updated', async () => {
    const req = request();
    const key = withdrawalKey(req.withdrawalId);
    await idemA.withdrawals.submit(req, key);
    const changed = await refusal(idemA.withdrawals.submit({ ...req, amountMinor: '1' }, key));
    expect(changed.code).toBe('IDEMPOTENCY_CONFLICT');
    expect((await idemA.withdrawals.get(req.withdrawalId)).amountMinor).toBe(req.amountMinor);
  });

  it('C06 the same destination and amount under two keys are two withdrawals', async () => {
    const first = request();
    const second = { ...first, withdrawalId: uniqueId('wd') };
    const one = await idemA.withdrawals.submit(first, withdrawalKey(first.withdrawalId));
    const two = await idemA.withdrawals.submit(second, withdrawalKey(second.withdrawalId));
    expect(one.withdrawal.operationId).not.toBe(two.withdrawal.operationId);
    expect([one.outcome, two.outcome]).toEqual(['CREATED', 'CREATED']);
  });

  it('C03 insufficient funds is a typed INSUFFICIENT_FUNDS the first time and on replay', async () => {
    const idem = createIdemClient({ baseUrl: server.baseUrl, apiKey: poor.apiKey });
    const req = request({ amountMinor: '5000' });
    const key = withdrawalKey(req.withdrawalId);
    const first = await refusal(idem.withdrawals.submit(req, key));
    const replay = await refusal(idem.withdrawals.submit(req, key));
    for (const error of [first, replay]) {
      expect(error.isInsufficientFunds).toBe(true);
      expect(error.status).toBe(422);
    }
    const stored = await idem.withdrawals.get(req.withdrawalId);
    expect([stored.state, stored.rejectionCode]).toEqual(['REJECTED', 'INSUFFICIENT_FUNDS']);
    expect(await idem.balances.get('cust-7')).toEqual([{ asset: 'ETH', available: '1000', held: '0' }]);
  });

  it('refuses bad input with VALIDATION and writes nothing', async () => {
    const before = await idemA.withdrawals.list({ limit: 100 });
    const cases: [Record<string, unknown>, string][] = [
      [request({ amountMinor: '1.5' }), 'withdrawal-float'],
      [request({ amountMinor: '1e18' }), 'withdrawal-exp'],
      [request({ amountMinor: '0100' }), 'withdrawal-lead'],
      [request({ amountMinor: '-5' }), 'withdrawal-neg'],
      [request({ amountMinor: '9'.repeat(79) }), 'withdrawal-long'],
      [request({ asset: 'DOGE' }), 'withdrawal-asset'],
      [
        request({ destination: '0x52908400098527886e0f7030069857d2e4169ee7'.replace('e0f', 'E0f') }),
        'withdrawal-cs',
      ],
      [request({ destination: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq' }), 'withdrawal-btc-on-eth'],
      [request(), ''],
      [request(), 'k'.repeat(256)],
      [request(), 'alice@example.com'],
    ];
    for (const [req, key] of cases) {
      const error = await refusal(idemA.withdrawals.submit(req as ReturnType<typeof request>, key));
      expect(error.code, JSON.stringify({ req, key })).toBe('VALIDATION');
      expect(error.status).toBe(400);
    }
    const after = await idemA.withdrawals.list({ limit: 100 });
    expect(after.items.map((item) => item.operationId)).toEqual(before.items.map((item) => item.operationId));
  });

  it('accepts the key in an Idempotency-Key header and refuses a header that disagrees with the body', async () => {
    const req = request();
    const call = (headers: Record<string, string>, body: unknown) =>
      fetch(`${server.baseUrl}/trpc/withdrawals.submit`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.apiKey}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    const created = await call({ 'idempotency-key': withdrawalKey(req.withdrawalId) }, { request: req });
    expect(created.status).toBe(200);
    const replay = await idemA.withdrawals.submit(req, withdrawalKey(req.withdrawalId));
    expect(replay.outcome).toBe('REPLAYED');
    const disagree = await call(
      { 'idempotency-key': 'withdrawal-other' },
      { request: req, idempotencyKey: withdrawalKey(req.withdrawalId) },
    );
    expect(disagree.status).toBe(400);
    expect(((await disagree.json()) as { error: { data: { code: string } } }).error.data.code).toBe(
      'VALIDATION',
    );
  });

  it('errors carry the problem fields and the request id of the X-Request-Id header, and no stack', async () => {
    const response = await fetch(
      `${server.baseUrl}/trpc/withdrawals.get?input=${encodeURIComponent(JSON.stringify({ withdrawalId: 'nope' }))}`,
      {
        headers: { authorization: `Bearer ${a.apiKey}` },
      },
    );
    expect(response.status).toBe(404);
    const body = (await response.json()) as { error: { data: Record<string, unknown> } };
    expect(body.error.data).toMatchObject({
      code: 'NOT_FOUND',
      type: expect.stringContaining('not-found'),
      title: 'Not found',
      status: 404,
      detail: expect.any(String),
      requestId: response.headers.get('x-request-id'),
    });
    expect(JSON.stringify(body)).not.toMatch(/stack|at .*\.ts:\d+/);
  });

  it('refuses a missing, unknown or malformed API key with UNAUTHORIZED', async () => {
    for (const apiKey of ['', 'not-a-key', a.apiKey.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'))]) {
      const idem = createIdemClient({ baseUrl: server.baseUrl, apiKey });
      const error = await refusal(idem.assets.list());
      expect(error.code).toBe('UNAUTHORIZED');
      expect(error.status).toBe(401);
    }
  });

  it('refuses an oversized body with PAYLOAD_TOO_LARGE and a wrong content type with VALIDATION', async () => {
    const big = await fetch(`${server.baseUrl}/trpc/withdrawals.submit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        request: request({ memo: 'x'.repeat(200_000) }),
        idempotencyKey: 'withdrawal-big',
      }),
    });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { error: { data: { code: string } } }).error.data.code).toBe(
      'PAYLOAD_TOO_LARGE',
    );

    const text = await fetch(`${server.baseUrl}/trpc/withdrawals.submit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.apiKey}`, 'content-type': 'text/plain' },
      body: 'withdraw everything',
    });
    expect(text.status).toBe(400);
    expect(((await text.json()) as { error: { data: { code: string } } }).error.data.code).toBe('VALIDATION');
  });

  it('lists with a cursor and a state filter, and serves balances and assets', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const req = request();
      ids.push(req.withdrawalId);
      await idemB.withdrawals.submit(req, withdrawalKey(req.withdrawalId));
    }
    const first = await idemB.withdrawals.list({ limit: 2, state: 'REQUESTED' });
    expect(first.items).toHaveLength(2);
    expect(first.nextCursor).not.toBeNull();
    const second = await idemB.withdrawals.list({
      limit: 2,
      state: 'REQUESTED',
      cursor: first.nextCursor ?? '',
    });
    const seen = [...first.items, ...second.items].map((item) => item.reference);
    expect(seen.slice(0, 3)).toEqual([...ids].reverse());
    expect((await idemB.withdrawals.list({ state: 'CONFIRMED' })).items).toEqual([]);
    expect((await idemB.assets.list()).map((asset) => asset.code)).toEqual(['BTC', 'ETH', 'USDC']);
  });

  it('I15 C01 a key is looked up by the SDK for its own tenant only, and deposits are listed per account', async () => {
    const req = request();
    const key = withdrawalKey(req.withdrawalId);
    const { withdrawal } = await idemA.withdrawals.submit(req, key);
    expect(await idemA.withdrawals.getByKey(key)).toEqual(await idemA.withdrawals.get(req.withdrawalId));
    expect((await idemA.withdrawals.getByKey(key)).operationId).toBe(withdrawal.operationId);
    // Another tenant's key, and a key never used, are the same NOT_FOUND (seed 004: outcome(key) is None).
    expect((await refusal(idemB.withdrawals.getByKey(key))).code).toBe('NOT_FOUND');
    expect((await refusal(idemA.withdrawals.getByKey('withdrawal-never-sent'))).code).toBe('NOT_FOUND');

    // provisionTenant funded cust-7 with one deposit per tenant.
    const deposits = await idemA.deposits.list({ accountId: 'cust-7' });
    expect(deposits.items.length).toBeGreaterThanOrEqual(1);
    expect(deposits.items.every((d) => d.kind === 'deposit' && d.accountId === 'cust-7')).toBe(true);
    expect((await idemA.deposits.list({ accountId: 'cust-nobody' })).items).toEqual([]);
    const theirs = new Set((await idemB.deposits.list()).items.map((d) => d.operationId));
    expect(deposits.items.some((d) => theirs.has(d.operationId))).toBe(false);
  });

  it('C22 an unfiltered query through the application role sees the caller tenant only', async () => {
    // Both tenants hold withdrawals by now (same keys even). Stop the server on PGlite first:
    // its data directory belongs to one process.
    if (backend.kind === 'pglite') await server.stop();
    await withDirectDatabase(backend, async (db) => {
      for (const tenant of [a, b]) {
        const rows = await withTenant(db, tenant.tenantId, (tx) => tx.select().from(operations));
        expect(rows.length).toBeGreaterThan(0);
        expect(new Set(rows.map((row) => row.tenantId))).toEqual(new Set([tenant.tenantId]));
      }
    });
  });

  /** Direct reads while the server runs are possible on PostgreSQL only. */
  async function withDirectDatabaseWhenShared(work: Parameters<typeof withDirectDatabase>[1]) {
    if (backend.kind === 'postgres') await withDirectDatabase(backend, work);
  }
});
