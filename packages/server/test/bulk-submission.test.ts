/**
 * I17: the bulk submission API, `withdrawals.submitMany` on tRPC and the SDK and
 * `POST /v1/withdrawal-batches` on the REST face. Real server process, real PostgreSQL. Each item
 * is answered as a single submission would answer it; one item's refusal never touches the others.
 */

import { batchingOf, rowsOf, submitWithdrawal, withTenant } from '@idem/core';
import { createIdemClient, IdemApiError, withdrawalKey } from '@idem/sdk';
import { createTestDatabase, onPostgres } from '@idem/testing/database';
import type { ServerProcess } from '@idem/testing/server';
import { strandWithdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openConfiguredDatabase } from '../src/database.ts';
import { readEnv } from '../src/env.ts';
import { RateLimiter } from '../src/rate-limit.ts';
import type { PgProxy } from './support/pg-proxy.ts';
import { ETH, provisionTenant, type TenantFixture, withdrawalBody } from './support/provision.ts';
import { type ProxiedServer, startProxiedServer } from './support/proxied-server.ts';
import { restClient } from './support/rest.ts';
import { serveForTests } from './support/served.ts';

const request = withdrawalBody;
type Request = ReturnType<typeof request>;
const item = (body: Request, idempotencyKey = withdrawalKey(body.withdrawalId)) => ({
  idempotencyKey,
  request: body,
});

interface ItemResult {
  outcome?: 'CREATED' | 'REPLAYED';
  withdrawal?: { operationId: string; reference: string; state: string };
  error?: { code: string; message: string; holderKey?: string; issues?: { path: string }[] };
}
/** A face's answer to one bulk call: the per-item results, or the refusal of the whole call. */
interface BatchAnswer {
  status: number;
  results?: ItemResult[];
  problem?: { code: string; retryAfterMs?: number };
  retryAfter?: string | null;
  /** The server's id of the call, as its access log names it. */
  requestId: string | null;
}
interface Face {
  name: string;
  submitMany(baseUrl: string, apiKey: string, items: unknown[]): Promise<BatchAnswer>;
}

/** tRPC's wire format, as any tRPC client sends an unbatched mutation. */
const trpcFace: Face = {
  name: 'tRPC',
  async submitMany(baseUrl, apiKey, items) {
    const response = await fetch(`${baseUrl}/trpc/withdrawals.submitMany`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ items }),
    });
    const body = (await response.json()) as {
      result?: { data: { results: ItemResult[] } };
      error?: { data: { code: string; retryAfterMs?: number } };
    };
    return {
      status: response.status,
      results: body.result?.data.results,
      problem: body.error?.data,
      retryAfter: response.headers.get('retry-after'),
      requestId: response.headers.get('x-request-id'),
    };
  },
};

/** Plain HTTP, every answer checked against the server's OpenAPI document (support/rest.ts). */
const restFace: Face = {
  name: 'REST',
  async submitMany(baseUrl, apiKey, items) {
    const { call } = await restClient(baseUrl);
    const answer = await call('POST', '/v1/withdrawal-batches', { apiKey, body: { items } });
    const requestId = answer.headers.get('x-request-id');
    return answer.status === 200
      ? { status: 200, results: answer.body.results as ItemResult[], requestId }
      : {
          status: answer.status,
          problem: answer.body as BatchAnswer['problem'],
          retryAfter: answer.headers.get('retry-after'),
          requestId,
        };
  },
};

describe.skipIf(!onPostgres)('I17 the bulk submission API (real PostgreSQL, real server)', () => {
  const served = serveForTests({
    kind: 'postgres',
    provision: (db) =>
      provisionTenant(db, {
        name: 'Bulk Exchange',
        fund: [
          { accountId: 'cust-7', asset: 'ETH', amountMinor: (100n * ETH).toString() },
          { accountId: 'cust-poor', asset: 'ETH', amountMinor: '1000' },
        ],
      }),
    env: { IDEM_RATE_LIMIT_PER_SECOND: '10000' },
  });
  const db = () => {
    if (served.backend.kind !== 'postgres') throw new Error('these tests run on PostgreSQL');
    return served.backend.database.db;
  };

  /** Per withdrawal id: how many operations, and the funds held by them. */
  async function stored(references: string[]) {
    const { tenantId } = served.fixtures;
    const rows = rowsOf<{ reference: string; n: number; state: string }>(
      await db().execute(sql`
        select reference, count(*)::int as n, min(state) as state from operations
         where tenant_id = ${tenantId}::uuid and reference in ${references}
         group by reference`),
    );
    const [held] = rowsOf<{ held: string }>(
      await db().execute(sql`
        select coalesce(sum(p.amount), 0)::text as held
          from postings p join journal_entries e on e.tenant_id = p.tenant_id and e.entry_id = p.entry_id
          join operations o on o.tenant_id = e.tenant_id and o.operation_id = e.operation_id
         where o.tenant_id = ${tenantId}::uuid and p.bucket = 'held'
           and o.reference in ${references}`),
    );
    return { byReference: new Map(rows.map((row) => [row.reference, row])), held: held?.held };
  }

  describe.each([trpcFace, restFace])('I17 on the $name face', (face) => {
    it('I17 answers each item on its own: CREATED, REPLAYED, a changed payload, a second key for a held id, insufficient funds, a bad amount', async () => {
      const { apiKey } = served.fixtures;
      const base = served.server.baseUrl;
      const first = request();
      const second = request({ amountMinor: '7' });
      const before = await face.submitMany(base, apiKey, [item(first), item(second)]);
      expect(before.status, JSON.stringify(before)).toBe(200);
      expect(before.results?.map((result) => result.outcome)).toEqual(['CREATED', 'CREATED']);

      const fresh = request();
      const poor = request({ accountId: 'cust-poor', amountMinor: '5000' });
      const bad = request({ amountMinor: '1.5' });
      const last = request({ amountMinor: '11' });
      const answer = await face.submitMany(base, apiKey, [
        item(fresh),
        item(first),
        item({ ...second, amountMinor: '8' }),
        item(first, `${withdrawalKey(first.withdrawalId)}-again`),
        item(poor),
        item(bad),
        item(last),
      ]);
      expect(answer.status, JSON.stringify(answer)).toBe(200);
      const results = answer.results ?? [];
      expect(results).toHaveLength(7);
      expect(results[0]).toMatchObject({ outcome: 'CREATED', withdrawal: { reference: fresh.withdrawalId } });
      expect(results[1]).toMatchObject({
        outcome: 'REPLAYED',
        withdrawal: { operationId: before.results?.[0]?.withdrawal?.operationId },
      });
      expect(results[2]?.error).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT' });
      expect(results[2]?.error?.holderKey).toBeUndefined();
      expect(results[3]?.error).toMatchObject({
        code: 'IDEMPOTENCY_CONFLICT',
        holderKey: withdrawalKey(first.withdrawalId),
      });
      expect(results[4]?.error).toMatchObject({ code: 'INSUFFICIENT_FUNDS' });
      expect(results[5]?.error).toMatchObject({ code: 'VALIDATION' });
      expect(results[5]?.error?.issues?.map((issue) => issue.path)).toEqual(['request.amountMinor']);
      expect(results[6]).toMatchObject({ outcome: 'CREATED', withdrawal: { reference: last.withdrawalId } });

      // The database: one operation per created key, the rejected one stored REJECTED without a
      // hold, nothing for the malformed item, and the holds exactly the created amounts.
      const created = [first, second, fresh, last];
      const { byReference, held } = await stored([...created, poor, bad].map((r) => r.withdrawalId));
      for (const body of created) expect(byReference.get(body.withdrawalId)?.n, body.withdrawalId).toBe(1);
      expect(byReference.get(poor.withdrawalId)).toMatchObject({ n: 1, state: 'REJECTED' });
      expect(byReference.has(bad.withdrawalId)).toBe(false);
      expect(held).toBe(created.reduce((sum, body) => sum + BigInt(body.amountMinor), 0n).toString());

      // A replay of the whole batch is safe: the same answers, nothing new written.
      const again = await face.submitMany(base, apiKey, [item(fresh), item(poor), item(last)]);
      expect(again.results?.map((result) => result.outcome ?? result.error?.code)).toEqual([
        'REPLAYED',
        'INSUFFICIENT_FUNDS',
        'REPLAYED',
      ]);
      expect((await stored(created.map((r) => r.withdrawalId))).held).toBe(held);
    });

    it('I17 C05 an item whose outcome is UNKNOWN is IN_FLIGHT with retryAfterMs, the others answered as usual', async () => {
      const { apiKey, tenantId } = served.fixtures;
      const stuck = request({ amountMinor: '13' });
      const { operation } = await submitWithdrawal(db(), {
        tenantId,
        request: stuck,
        idempotencyKey: withdrawalKey(stuck.withdrawalId),
      });
      await withTenant(db(), tenantId, (tx) => strandWithdrawal(tx, operation, 'UNKNOWN'));
      const fresh = request();
      const answer = await face.submitMany(served.server.baseUrl, apiKey, [item(stuck), item(fresh)]);
      expect(answer.status, JSON.stringify(answer)).toBe(200);
      expect(answer.results?.[0]?.error).toMatchObject({ code: 'IN_FLIGHT', retryAfterMs: 5_000 });
      expect(answer.results?.[1]).toMatchObject({
        outcome: 'CREATED',
        withdrawal: { reference: fresh.withdrawalId },
      });
    });

    it('I17 refuses 1,001 items as a whole with VALIDATION and writes nothing', async () => {
      const { apiKey } = served.fixtures;
      const bodies = Array.from({ length: 1_001 }, () => request({ amountMinor: '1' }));
      const answer = await face.submitMany(
        served.server.baseUrl,
        apiKey,
        bodies.map((body) => item(body)),
      );
      expect(answer.status, JSON.stringify(answer.problem)).toBe(400);
      expect(answer.problem?.code).toBe('VALIDATION');
      const { byReference } = await stored(bodies.map((body) => body.withdrawalId));
      expect(byReference.size).toBe(0);
      const empty = await face.submitMany(served.server.baseUrl, apiKey, []);
      expect(empty.problem?.code).toBe('VALIDATION');
    });

    it('I17 C23 the access log names the procedure and counts per outcome, never a key or a destination', async () => {
      const { apiKey } = served.fixtures;
      const created = request();
      const refused = request({ amountMinor: '-1' });
      const answer = await face.submitMany(served.server.baseUrl, apiKey, [
        item(created),
        item(created),
        item(refused),
      ]);
      const lines = () =>
        served.server.output
          .join('')
          .split('\n')
          .filter((line) => line.includes('"msg":"request"') && line.includes('withdrawals.submitMany'))
          .map((line) => JSON.parse(line) as Record<string, unknown>);
      // The access line is the last a request writes (once its answer is sent): once this call's is
      // there, everything it logged is, and the absences below are meaningful.
      const line = await vi.waitFor(
        () => {
          const found = lines().find((entry) => entry.requestId === answer.requestId);
          if (!found) throw new Error(`no access line for request ${answer.requestId}`);
          return found;
        },
        { timeout: 5_000, interval: 20 },
      );
      expect(line.route).toBe(
        face.name === 'REST' ? 'rest:withdrawals.submitMany' : 'trpc:withdrawals.submitMany',
      );
      expect(line.outcomes, JSON.stringify(line)).toEqual({ CREATED: 1, REPLAYED: 1, VALIDATION: 1 });
      if (face.name === 'REST') expect(line.procedure).toBe('withdrawals.submitMany');
      const everything = served.server.output.join('');
      for (const secret of [
        withdrawalKey(created.withdrawalId),
        created.destination,
        refused.destination,
        apiKey,
      ]) {
        expect(everything).not.toContain(secret);
      }
    });
  });

  it('I17 a batch of 1,000 items, larger than the ordinary body limit, is written in one call', async () => {
    const { apiKey } = served.fixtures;
    const bodies = Array.from({ length: 1_000 }, () => request({ amountMinor: '3', memo: 'm'.repeat(100) }));
    const answer = await restFace.submitMany(
      served.server.baseUrl,
      apiKey,
      bodies.map((body) => item(body)),
    );
    expect(answer.status, JSON.stringify(answer.problem)).toBe(200);
    expect(new Set(answer.results?.map((result) => result.outcome))).toEqual(new Set(['CREATED']));
    expect(answer.results?.map((result) => result.withdrawal?.reference)).toEqual(
      bodies.map((body) => body.withdrawalId),
    );
    const { byReference, held } = await stored(bodies.map((body) => body.withdrawalId));
    expect(byReference.size).toBe(1_000);
    expect(held).toBe('3000');
  });

  it('I17 the SDK submits many with default keys, answers per item, and the keys replay', async () => {
    const idem = createIdemClient({ baseUrl: served.server.baseUrl, apiKey: served.fixtures.apiKey });
    const one = request();
    const two = request({ amountMinor: '5' });
    const bad = request({ destination: 'not-an-address' });
    const { results } = await idem.withdrawals.submitMany([
      { request: one },
      { request: two, idempotencyKey: `custom-${two.withdrawalId}` },
      { request: bad },
    ]);
    expect(results[0]).toMatchObject({ outcome: 'CREATED', withdrawal: { reference: one.withdrawalId } });
    expect(results[1]).toMatchObject({ outcome: 'CREATED', withdrawal: { reference: two.withdrawalId } });
    expect(results[2]).toMatchObject({ error: { code: 'VALIDATION' } });
    // The default key is withdrawalKey(id): the single call with it replays the batch's item.
    const replay = await idem.withdrawals.submit(one, withdrawalKey(one.withdrawalId));
    expect(replay.outcome).toBe('REPLAYED');
    expect(replay.withdrawal.operationId).toBe((results[0] as ItemResult).withdrawal?.operationId);
    const refused = await idem.withdrawals.submitMany([]).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(IdemApiError);
    expect((refused as IdemApiError).code).toBe('VALIDATION');
  });
});

describe.skipIf(!onPostgres)('I17 a bulk call costs one rate-limit token per item', () => {
  // A tenant per face: each starts with a full bucket, so neither waits for the other's to refill.
  const served = serveForTests({
    kind: 'postgres',
    provision: async (db) => ({
      trpc: await provisionTenant(db, { name: 'Bulk budget tRPC' }),
      rest: await provisionTenant(db, { name: 'Bulk budget REST' }),
    }),
    // Bursts of 16: one batch of 15 items fits and leaves 1; a second of 16 is refused unless the
    // first call took nearly 2 s (8 tokens a second refill), so a slow machine does not refill it.
    env: { IDEM_RATE_LIMIT_PER_SECOND: '8' },
  });

  it.each([trpcFace, restFace])(
    'I17 on the $name face: 429 RATE_LIMITED for a batch over the tenant budget',
    async (face) => {
      const { apiKey } = served.fixtures[face === restFace ? 'rest' : 'trpc'];
      const batch = (items: number) =>
        Array.from({ length: items }, () => item(request({ amountMinor: '1' })));
      const first = await face.submitMany(served.server.baseUrl, apiKey, batch(15));
      expect(first.status, JSON.stringify(first.problem)).toBe(200);
      const second = await face.submitMany(served.server.baseUrl, apiKey, batch(16));
      expect(second.status).toBe(429);
      expect(second.problem).toMatchObject({ code: 'RATE_LIMITED' });
      expect(second.problem?.retryAfterMs).toBeGreaterThan(0);
      expect(Number(second.retryAfter)).toBeGreaterThanOrEqual(1);
    },
  );
});

describe.skipIf(!onPostgres)('I17 a bulk call while the database is unreachable', () => {
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

  it.each([trpcFace, restFace])(
    'I17 I16-UNAVAILABLE on the $name face: the whole call is 503 UNAVAILABLE, and the same batch retried creates each item once',
    async (face) => {
      await proxy.restore();
      // Warm: the API key and the asset's context are known to the server, so only the write fails.
      const warm = await face.submitMany(server.baseUrl, tenant.apiKey, [item(request())]);
      expect(warm.status, JSON.stringify(warm)).toBe(200);

      const bodies = [request(), request()];
      await proxy.cut();
      const lost = await face.submitMany(
        server.baseUrl,
        tenant.apiKey,
        bodies.map((body) => item(body)),
      );
      expect(lost.status, JSON.stringify(lost)).toBe(503);
      expect(lost.problem).toMatchObject({ code: 'UNAVAILABLE' });
      expect(lost.problem?.retryAfterMs).toBeGreaterThan(0);
      expect(Number(lost.retryAfter)).toBeGreaterThanOrEqual(1);

      // The reply of a committed batch is lost: the server cannot know, and says UNAVAILABLE; the
      // retry of the same batch replays what was written.
      await proxy.restore();
      const key = withdrawalKey(bodies[1]?.withdrawalId ?? '');
      proxy.loseReplyAfter(key);
      const unknown = await face.submitMany(
        server.baseUrl,
        tenant.apiKey,
        bodies.map((body) => item(body)),
      );
      expect(proxy.lostReplies).toBeGreaterThanOrEqual(1);
      expect(unknown.status, JSON.stringify(unknown)).toBe(503);
      const retried = await face.submitMany(
        server.baseUrl,
        tenant.apiKey,
        bodies.map((body) => item(body)),
      );
      expect(retried.results?.map((result) => result.outcome)).toEqual(['REPLAYED', 'REPLAYED']);
      for (const body of bodies)
        expect(await operationsWithKey(withdrawalKey(body.withdrawalId))).toHaveLength(1);
    },
  );

  it('I17 I16-UNAVAILABLE some items malformed, the others lose the database: 200 with each item its own answer; the SDK sends the unavailable ones again and each is created once', async () => {
    await proxy.restore();
    const warm = await restFace.submitMany(server.baseUrl, tenant.apiKey, [item(request())]);
    expect(warm.status, JSON.stringify(warm)).toBe(200);

    const valid = [request(), request()];
    const bad = request({ amountMinor: '0' });
    await proxy.cut();
    const mixed = await restFace.submitMany(server.baseUrl, tenant.apiKey, [
      item(valid[0] as Request),
      item(bad),
    ]);
    expect(mixed.status, JSON.stringify(mixed)).toBe(200);
    expect(mixed.results?.map((result) => result.error?.code)).toEqual(['UNAVAILABLE', 'VALIDATION']);

    const patient = createIdemClient({
      baseUrl: server.baseUrl,
      apiKey: tenant.apiKey,
      retry: { attemptsMax: 20, totalMsMax: 60_000 },
    });
    // Fixed: the outage's length, a fault's schedule rather than a wait. The test waits on the SDK,
    // which backs off retryAfterMs (2 s) between attempts, so the database returns during its wait.
    const restored = new Promise((resolve) => setTimeout(resolve, 1_500)).then(() => proxy.restore());
    const { results } = await patient.withdrawals.submitMany([
      { request: valid[0] as Request },
      { request: bad },
      { request: valid[1] as Request },
    ]);
    await restored;
    expect(results.map((result) => ('error' in result ? result.error.code : result.outcome))).toEqual([
      'CREATED',
      'VALIDATION',
      'CREATED',
    ]);
    for (const body of valid)
      expect(await operationsWithKey(withdrawalKey(body.withdrawalId))).toHaveLength(1);
  });
});

describe.skipIf(!onPostgres)(
  'I17 IDEM_BATCHING and IDEM_BATCH_* configure the database the server opens',
  () => {
    it('I17 the defaults, each variable, and IDEM_BATCHING=off reach openDatabase', async () => {
      const database = await createTestDatabase({ maxConnections: 2 });
      const opened = async (vars: Record<string, string>) => {
        const handle = await openConfiguredDatabase(readEnv({ DATABASE_URL: database.url ?? '', ...vars }), {
          purpose: 'cli',
        });
        try {
          return batchingOf(handle.db);
        } finally {
          await handle.close();
        }
      };
      try {
        // One batch of a tenant in flight whatever the pool: the next gathers behind it.
        expect(await opened({})).toEqual({ maxItems: 64, maxWaitMs: 2, gatherFrom: 4, concurrency: 1 });
        expect(await opened({ IDEM_DB_POOL_MAX: '3' })).toEqual({
          maxItems: 64,
          maxWaitMs: 2,
          gatherFrom: 4,
          concurrency: 1,
        });
        expect(
          await opened({
            IDEM_BATCH_MAX_ITEMS: '16',
            IDEM_BATCH_MAX_WAIT_MS: '5',
            IDEM_BATCH_CONCURRENCY: '8',
            IDEM_BATCH_GATHER_FROM: '2',
          }),
        ).toEqual({ maxItems: 16, maxWaitMs: 5, gatherFrom: 2, concurrency: 8 });
        expect(await opened({ IDEM_BATCHING: 'off' })).toBe(false);
        expect(() => readEnv({ IDEM_BATCHING: 'maybe' })).toThrow(/IDEM_BATCHING/);
        expect(() => readEnv({ IDEM_BATCH_MAX_ITEMS: '0' })).toThrow(/IDEM_BATCH_MAX_ITEMS/);
        expect(() => readEnv({ IDEM_BATCH_GATHER_FROM: '0' })).toThrow(/IDEM_BATCH_GATHER_FROM/);
      } finally {
        await database.dispose();
      }
    });
  },
);

describe('I17 the tenant token bucket charges a bulk call per item', () => {
  it('I17 take(key, cost) takes cost tokens; a cost above the burst waits for a full bucket and takes it', () => {
    const limiter = new RateLimiter(10); // 10 per second, bursts of 20
    expect(limiter.take('t', 15, 0)).toBe(0);
    // 5 left: 15 more need 10 more tokens, a second at 10 per second.
    expect(limiter.take('t', 15, 0)).toBe(1_000);
    expect(limiter.take('t', 15, 1_000)).toBe(0);
    // More than the bucket ever holds: charged as the burst, so it goes through once the bucket is full.
    expect(limiter.take('u', 50, 0)).toBe(0);
    expect(limiter.take('u', 50, 1_000)).toBe(1_000);
    expect(limiter.take('u', 50, 2_000)).toBe(0);
    expect(limiter.take('v', 1, 0)).toBe(0);
  });
});
