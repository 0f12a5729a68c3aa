import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  backoffMs,
  createIdemClient,
  DEFAULT_RETRY,
  IdemApiError,
  IdemTransportError,
  withdrawalKey,
} from '../src/index.ts';

describe('withdrawalKey', () => {
  it('derives one stable key per withdrawal id', () => {
    expect(withdrawalKey('42')).toBe('withdrawal-42');
    expect(withdrawalKey(42)).toBe(withdrawalKey('42'));
  });
  it('refuses empty and whitespace ids', () => {
    for (const id of ['', ' ', '\t', ' 42', '42 ']) expect(() => withdrawalKey(id)).toThrow(TypeError);
  });
});

describe('backoff', () => {
  it('stays within its exponential ceiling and honours retryAfterMs as a floor', () => {
    for (let attempt = 1; attempt < 10; attempt += 1) {
      const ceiling = Math.min(DEFAULT_RETRY.delayMsMax, DEFAULT_RETRY.delayMsBase * 2 ** (attempt - 1));
      expect(backoffMs(DEFAULT_RETRY, attempt, undefined, () => 0.999)).toBeLessThan(ceiling);
      expect(backoffMs(DEFAULT_RETRY, attempt, 300, () => 0)).toBe(300);
      expect(backoffMs(DEFAULT_RETRY, attempt, 300, () => 0.999)).toBeGreaterThanOrEqual(300);
    }
  });
});

/**
 * Retry behaviour against a scripted HTTP endpoint speaking tRPC's wire format: the unit under
 * test is the SDK's retry loop, so the server side answers exactly what each case needs.
 */
describe('retries', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  type Answer = [number, unknown] | 'drop' | { afterMs: number; answer: [number, unknown] };
  async function scripted(answers: ((body: string) => Answer)[]) {
    const seen: string[] = [];
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => {
        seen.push(body);
        const answer = (answers[seen.length - 1] ?? answers[answers.length - 1])?.(body);
        if (!answer || answer === 'drop') return req.socket.destroy();
        const [status, body_] = Array.isArray(answer) ? answer : answer.answer;
        setTimeout(
          () => {
            if (res.destroyed) return;
            res.writeHead(status, { 'content-type': 'application/json' });
            res.end(JSON.stringify(body_));
          },
          Array.isArray(answer) ? 0 : answer.afterMs,
        );
      });
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as AddressInfo;
    return { baseUrl: `http://127.0.0.1:${port}`, seen };
  }
  const problem = (code: string, status: number, extra: Record<string, unknown> = {}) =>
    [
      status,
      {
        error: {
          code: -32000,
          message: code,
          data: { code, type: 't', title: 't', status, detail: code, requestId: 'r1', ...extra },
        },
      },
    ] as [number, unknown];
  const success = (): [number, unknown] => [
    200,
    {
      result: {
        data: {
          outcome: 'REPLAYED',
          withdrawal: {
            operationId: '00000000-0000-4000-8000-000000000000',
            kind: 'withdrawal',
            reference: '42',
            accountId: 'cust-7',
            asset: 'ETH',
            network: 'ethereum',
            destination: null,
            memo: null,
            amountMinor: '1',
            feeCapMinor: null,
            state: 'REQUESTED',
            rejectionCode: null,
            txHash: null,
            custodianTransferId: null,
            custodianTxHash: null,
            waitingReason: null,
            createdAt: 'x',
            updatedAt: 'x',
          },
        },
      },
    },
  ];
  const request = {
    withdrawalId: '42',
    accountId: 'cust-7',
    asset: 'ETH',
    destination: '0x0',
    amountMinor: '1',
  };

  it('retries a dropped connection, a 5xx and IN_FLIGHT with the same key, waiting retryAfterMs', async () => {
    const { baseUrl, seen } = await scripted([
      () => 'drop',
      () => problem('INTERNAL', 500),
      () => problem('IN_FLIGHT', 409, { retryAfterMs: 150 }),
      success,
    ]);
    const idem = createIdemClient({ baseUrl, apiKey: 'k', retry: { delayMsBase: 1 } });
    const started = Date.now();
    const result = await idem.withdrawals.submit(request, withdrawalKey('42'));
    expect(result.outcome).toBe('REPLAYED');
    expect(seen).toHaveLength(4);
    expect(new Set(seen.map((body) => JSON.parse(body).idempotencyKey))).toEqual(new Set(['withdrawal-42']));
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
  });

  it('I17 submitMany retries the whole batch with the same keys on a dropped connection and UNAVAILABLE', async () => {
    const batch = (): [number, unknown] => {
      const [status, body] = success();
      const { data } = (body as { result: { data: unknown } }).result;
      return [
        status,
        { result: { data: { results: [data, { error: { code: 'VALIDATION', message: 'bad' } }] } } },
      ];
    };
    const { baseUrl, seen } = await scripted([
      () => 'drop',
      () => problem('UNAVAILABLE', 503, { retryAfterMs: 20 }),
      batch,
    ]);
    const idem = createIdemClient({ baseUrl, apiKey: 'k', retry: { delayMsBase: 1 } });
    const { results } = await idem.withdrawals.submitMany([
      { request },
      { request: { ...request, withdrawalId: '43' }, idempotencyKey: 'mine-43' },
    ]);
    expect(results[0]).toMatchObject({ outcome: 'REPLAYED' });
    expect(results[1]).toEqual({ error: { code: 'VALIDATION', message: 'bad' } });
    expect(seen).toHaveLength(3);
    // Every attempt carries the same keys: the default withdrawalKey(id), and the caller's own.
    for (const body of seen) {
      expect(JSON.parse(body).items.map((item: { idempotencyKey: string }) => item.idempotencyKey)).toEqual([
        'withdrawal-42',
        'mine-43',
      ]);
    }
  });

  it('I17 submitMany sends again only the items answered IN_FLIGHT or UNAVAILABLE, with their keys, and keeps the others', async () => {
    const view = (reference: string) => {
      const [, body] = success();
      const { data } = (body as { result: { data: { withdrawal: Record<string, unknown> } } }).result;
      return { outcome: 'CREATED', withdrawal: { ...data.withdrawal, reference } };
    };
    const unavailable = { error: { code: 'UNAVAILABLE', message: 'lost', retryAfterMs: 20 } };
    const { baseUrl, seen } = await scripted([
      () => [
        200,
        {
          result: {
            data: {
              results: [
                view('1'),
                unavailable,
                { error: { code: 'VALIDATION', message: 'bad' } },
                { error: { code: 'IN_FLIGHT', message: 'wait', retryAfterMs: 10 } },
              ],
            },
          },
        },
      ],
      () => [200, { result: { data: { results: [view('2'), unavailable] } } }],
      () => [200, { result: { data: { results: [view('4')] } } }],
    ]);
    const idem = createIdemClient({ baseUrl, apiKey: 'k', retry: { delayMsBase: 1 } });
    const { results } = await idem.withdrawals.submitMany(
      ['1', '2', '3', '4'].map((withdrawalId) => ({ request: { ...request, withdrawalId } })),
    );
    expect(
      results.map((result) => ('error' in result ? result.error.code : result.withdrawal.reference)),
    ).toEqual(['1', '2', 'VALIDATION', '4']);
    const keys = seen.map((body) =>
      JSON.parse(body).items.map((item: { idempotencyKey: string }) => item.idempotencyKey),
    );
    expect(keys).toEqual([
      ['withdrawal-1', 'withdrawal-2', 'withdrawal-3', 'withdrawal-4'],
      ['withdrawal-2', 'withdrawal-4'],
      ['withdrawal-4'],
    ]);
  });

  it('I17 submitMany returns a retryable item answer as it stands once the attempts run out', async () => {
    const { baseUrl, seen } = await scripted([
      () => [200, { result: { data: { results: [{ error: { code: 'IN_FLIGHT', message: 'wait' } }] } } }],
    ]);
    const idem = createIdemClient({ baseUrl, apiKey: 'k', retry: { delayMsBase: 1, attemptsMax: 3 } });
    const { results } = await idem.withdrawals.submitMany([{ request }]);
    expect(results).toEqual([{ error: { code: 'IN_FLIGHT', message: 'wait' } }]);
    expect(seen).toHaveLength(3);
  });

  it('never retries a conflict or a validation error', async () => {
    for (const code of ['IDEMPOTENCY_CONFLICT', 'VALIDATION']) {
      const { baseUrl, seen } = await scripted([
        () => problem(code, code === 'VALIDATION' ? 400 : 409, { holderKey: 'withdrawal-1' }),
      ]);
      const idem = createIdemClient({ baseUrl, apiKey: 'k' });
      const error = await idem.withdrawals.submit(request, 'withdrawal-42').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(IdemApiError);
      expect((error as IdemApiError).code).toBe(code);
      expect(seen).toHaveLength(1);
      await new Promise<void>((resolve) => server?.close(() => resolve()));
      server = undefined;
    }
  });

  it('abandons an attempt that outlives requestTimeoutMs and retries it with the same key', async () => {
    const { baseUrl, seen } = await scripted([() => ({ afterMs: 1_000, answer: success() }), success]);
    const idem = createIdemClient({ baseUrl, apiKey: 'k', requestTimeoutMs: 100, retry: { delayMsBase: 1 } });
    const started = Date.now();
    const result = await idem.withdrawals.submit(request, withdrawalKey('42'));
    expect(result.outcome).toBe('REPLAYED');
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(seen.map((body) => JSON.parse(body).idempotencyKey)).toEqual(['withdrawal-42', 'withdrawal-42']);
  });

  it('sends through a caller-supplied fetch instead of its own transport', async () => {
    const { baseUrl, seen } = await scripted([success]);
    const urls: string[] = [];
    const idem = createIdemClient({
      baseUrl,
      apiKey: 'k',
      fetch: (input, init) => {
        urls.push(String(input));
        return fetch(input, init);
      },
    });
    await idem.withdrawals.submit(request, withdrawalKey('42'));
    expect(urls).toEqual([`${baseUrl}/trpc/withdrawals.submit`]);
    expect(seen).toHaveLength(1);
  });

  it('gives up after the attempt bound with a transport error', async () => {
    const { baseUrl, seen } = await scripted([() => 'drop']);
    const idem = createIdemClient({ baseUrl, apiKey: 'k', retry: { attemptsMax: 3, delayMsBase: 1 } });
    const error = await idem.assets.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdemTransportError);
    expect(seen).toHaveLength(3);
  });
});
