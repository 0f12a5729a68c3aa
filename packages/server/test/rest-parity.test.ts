import { rowsOf } from '@idem/core';
import { createIdemClient, IdemApiError, type IdemClient, withdrawalKey } from '@idem/sdk';
import { onPostgres } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { ETH, evmAddress, provisionTenant, type TenantFixture } from './support/provision.ts';
import { restClient } from './support/rest.ts';
import { serveForTests } from './support/served.ts';

const destination = evmAddress();
const withdrawal = (withdrawalId: string, amountMinor: string) => ({
  withdrawalId,
  accountId: 'cust-7',
  asset: 'ETH',
  destination,
  amountMinor,
});

/** One call, described once and made on either face. */
type Step =
  | { submit: ReturnType<typeof withdrawal>; key: string }
  | { get: string }
  | { getByKey: string }
  | { list: 'REQUESTED' }
  | { balances: string }
  | { deposits: string };

const small = (ETH / 100n).toString();
/** The same calls, in order, for both faces: what each answers is compared step by step. */
const STEPS: Step[] = [
  { submit: withdrawal('p-1', small), key: withdrawalKey('p-1') },
  { submit: withdrawal('p-1', small), key: withdrawalKey('p-1') },
  { submit: withdrawal('p-1', '777'), key: withdrawalKey('p-1') },
  { submit: withdrawal('p-1', small), key: 'withdrawal-p-1-again' },
  { submit: withdrawal('p-2', '1.5'), key: withdrawalKey('p-2') },
  { submit: withdrawal('p-3', (1000n * ETH).toString()), key: withdrawalKey('p-3') },
  { submit: withdrawal('p-3', (1000n * ETH).toString()), key: withdrawalKey('p-3') },
  { submit: withdrawal('p-4', small), key: 'has space' },
  { get: 'p-1' },
  { get: 'p-2' },
  { getByKey: withdrawalKey('p-1') },
  { getByKey: 'withdrawal-p-1-again' },
  { list: 'REQUESTED' },
  { balances: 'cust-7' },
  { deposits: 'cust-7' },
];

/** What a step answered, face-neutral: an outcome or an error code, and the fields that must agree. */
type Answer = { ok: unknown } | { code: string; holderKey?: string };

async function viaTrpc(sdk: IdemClient, step: Step): Promise<Answer> {
  try {
    if ('submit' in step) {
      const { outcome, withdrawal: view } = await sdk.withdrawals.submit(step.submit, step.key);
      return { ok: { outcome, reference: view.reference, state: view.state } };
    }
    if ('get' in step) return { ok: (await sdk.withdrawals.get(step.get)).reference };
    if ('getByKey' in step) return { ok: (await sdk.withdrawals.getByKey(step.getByKey)).reference };
    if ('list' in step) return { ok: (await sdk.withdrawals.list({ state: step.list })).items.length };
    if ('balances' in step) return { ok: await sdk.balances.get(step.balances) };
    return { ok: (await sdk.deposits.list({ accountId: step.deposits })).items.length };
  } catch (error) {
    if (!(error instanceof IdemApiError)) throw error;
    return error.problem.holderKey
      ? { code: error.code, holderKey: error.problem.holderKey }
      : { code: error.code };
  }
}

async function viaRest(rest: Awaited<ReturnType<typeof restClient>>, apiKey: string, step: Step) {
  const answer = await (async () => {
    if ('submit' in step) {
      return rest.call('POST', '/v1/withdrawals', {
        apiKey,
        body: step.submit,
        headers: { 'idempotency-key': step.key },
      });
    }
    if ('get' in step) {
      return rest.call('GET', '/v1/withdrawals/{withdrawalId}', {
        apiKey,
        params: { withdrawalId: step.get },
      });
    }
    if ('getByKey' in step) {
      return rest.call('GET', '/v1/idempotency-keys/{key}', { apiKey, params: { key: step.getByKey } });
    }
    if ('list' in step) return rest.call('GET', '/v1/withdrawals', { apiKey, query: { state: step.list } });
    if ('balances' in step) {
      return rest.call('GET', '/v1/accounts/{accountId}/balances', {
        apiKey,
        params: { accountId: step.balances },
      });
    }
    return rest.call('GET', '/v1/deposits', { apiKey, query: { accountId: step.deposits } });
  })();
  const body = answer.body as Record<string, unknown>;
  if (answer.status >= 400) {
    return (body.holderKey ? { code: body.code, holderKey: body.holderKey } : { code: body.code }) as Answer;
  }
  if ('submit' in step) {
    const view = body.withdrawal as { reference: string; state: string };
    return { ok: { outcome: body.outcome, reference: view.reference, state: view.state } };
  }
  if ('get' in step || 'getByKey' in step) return { ok: body.reference };
  if ('list' in step || 'deposits' in step) return { ok: (body.items as unknown[]).length };
  return { ok: body };
}

describe('I15 the REST face and the tRPC face give the same answers and leave the same state', () => {
  const served = serveForTests({
    kind: onPostgres ? 'postgres' : 'pglite',
    provision: async (db) => ({
      forRest: await provisionTenant(db, { name: 'Through REST' }),
      forTrpc: await provisionTenant(db, { name: 'Through tRPC' }),
    }),
  });

  it('I15 C01 C03 C04 table-driven: the same calls on two identical tenants, step by step, then their rows', async () => {
    const { forRest, forTrpc } = served.fixtures;
    const rest = await restClient(served.server.baseUrl);
    const sdk = createIdemClient({
      baseUrl: served.server.baseUrl,
      apiKey: forTrpc.apiKey,
      retry: { attemptsMax: 1 },
    });
    const answers: { step: number; rest: Answer; trpc: Answer }[] = [];
    for (const [index, step] of STEPS.entries()) {
      answers.push({
        step: index,
        rest: await viaRest(rest, forRest.apiKey, step),
        trpc: await viaTrpc(sdk, step),
      });
    }
    for (const answer of answers) expect(answer.rest, `step ${answer.step}`).toEqual(answer.trpc);
    // The table exercises refusals, not only successes.
    expect(answers.map((answer) => ('code' in answer.rest ? answer.rest.code : 'ok'))).toEqual([
      'ok',
      'ok',
      'IDEMPOTENCY_CONFLICT',
      'IDEMPOTENCY_CONFLICT',
      'VALIDATION',
      'INSUFFICIENT_FUNDS',
      'INSUFFICIENT_FUNDS',
      'VALIDATION',
      'ok',
      'NOT_FOUND',
      'ok',
      'NOT_FOUND',
      'ok',
      'ok',
      'ok',
    ]);

    const backend = served.backend;
    if (backend.kind === 'postgres') {
      const db = backend.database.db;
      const rows = async (tenant: TenantFixture) =>
        rowsOf(
          await db.execute(sql`
            select kind, reference, idempotency_key, account_ref, asset_code, amount_minor::text,
                   state, rejection_code, destination
              from operations where tenant_id = ${tenant.tenantId}::uuid and kind = 'withdrawal'
             order by reference`),
        );
      const postings = async (tenant: TenantFixture) =>
        rowsOf(
          await db.execute(sql`
            select p.account, p.bucket, p.asset_code, sum(p.amount)::text as net, count(*)::int as n
              from postings p where p.tenant_id = ${tenant.tenantId}::uuid
             group by 1, 2, 3 order by 1, 2, 3`),
        );
      expect(await rows(forRest)).toEqual(await rows(forTrpc));
      expect(await postings(forRest)).toEqual(await postings(forTrpc));
      expect(await rows(forRest)).toHaveLength(2);
    }
  });
});

describe.skipIf(!onPostgres)('I15 C03 a storm on the REST face (real PostgreSQL)', () => {
  const served = serveForTests({
    kind: 'postgres',
    provision: (db) => provisionTenant(db),
    env: { IDEM_RATE_LIMIT_PER_SECOND: '10000' },
  });

  it('I15 C03 100 concurrent POST /v1/withdrawals with one key: one 201, 99 replays, one operation, one hold', async () => {
    const { apiKey, tenantId } = served.fixtures;
    const body = withdrawal('storm-1', (ETH / 10n).toString());
    const key = withdrawalKey(body.withdrawalId);
    const answers = await Promise.all(
      Array.from({ length: 100 }, () =>
        fetch(`${served.server.baseUrl}/v1/withdrawals`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${apiKey}`,
            'content-type': 'application/json',
            'idempotency-key': key,
          },
          body: JSON.stringify(body),
        }).then(async (response) => ({
          status: response.status,
          replayed: response.headers.get('idempotent-replayed'),
          operationId: ((await response.json()) as { withdrawal: { operationId: string } }).withdrawal
            .operationId,
        })),
      ),
    );
    expect(answers.filter((answer) => answer.status === 201)).toHaveLength(1);
    expect(answers.filter((answer) => answer.status === 200 && answer.replayed === 'true')).toHaveLength(99);
    expect(new Set(answers.map((answer) => answer.operationId)).size).toBe(1);

    const db = served.backend.kind === 'postgres' ? served.backend.database.db : null;
    if (!db) throw new Error('the storm runs on PostgreSQL');
    const operations = rowsOf<{ n: number }>(
      await db.execute(
        sql`select count(*)::int as n from operations where tenant_id = ${tenantId}::uuid and reference = 'storm-1'`,
      ),
    );
    expect(operations[0]?.n).toBe(1);
    const holds = rowsOf<{ n: number; held: string }>(
      await db.execute(sql`
        select count(*)::int as n, coalesce(sum(p.amount), 0)::text as held
          from postings p join journal_entries e on e.tenant_id = p.tenant_id and e.entry_id = p.entry_id
          join operations o on o.tenant_id = e.tenant_id and o.operation_id = e.operation_id
         where o.tenant_id = ${tenantId}::uuid and o.reference = 'storm-1' and p.bucket = 'held'`),
    );
    expect(holds[0]).toEqual({ n: 1, held: body.amountMinor });
  });
});
