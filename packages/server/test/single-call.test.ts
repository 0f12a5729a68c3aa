import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { withdrawalKey } from '@idem/sdk';
import { initTRPC } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSingleCallHandler } from '../src/http/trpc-single-call.ts';
import { evmAddress, provisionTenant, uniqueId } from './support/provision.ts';
import { serveForTests } from './support/served.ts';

/**
 * Single JSON mutations are answered by our thin adapter (src/http/trpc-single-call.ts), everything
 * else by tRPC's. An integrator must not be able to tell them apart.
 */
describe('single tRPC calls', () => {
  describe('answered by the server', () => {
    const served = serveForTests({
      env: { IDEM_BODY_LIMIT_BYTES: '4096' },
      provision: (db) => provisionTenant(db),
    });

    /** The same call once alone (our adapter) and once as a batch of one (tRPC's adapter). */
    async function bothWays(name: string, body: string, headers: Record<string, string>) {
      const send = (query: string, payload: string) =>
        fetch(`${served.server.baseUrl}/trpc/withdrawals.submit${query}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-request-id': `same-${name}`, ...headers },
          body: payload,
        });
      const single = await send('', body);
      const batch = await send('?batch=1', `{"0":${body}}`);
      const singleBody = (await single.json()) as unknown;
      const batchBody = (await batch.json()) as unknown[];
      return {
        single: { status: single.status, type: single.headers.get('content-type'), body: singleBody },
        batch: { status: batch.status, type: batch.headers.get('content-type'), body: batchBody[0] },
      };
    }

    it('answers every kind of outcome exactly as tRPC answers the same call in a batch', async () => {
      const withdrawalId = uniqueId('wd');
      const request = {
        withdrawalId,
        accountId: 'cust-7',
        asset: 'ETH',
        destination: evmAddress(),
        amountMinor: '1000',
      };
      const auth = { authorization: `Bearer ${served.fixtures.apiKey}` };
      const created = await fetch(`${served.server.baseUrl}/trpc/withdrawals.submit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...auth },
        body: JSON.stringify({ request, idempotencyKey: withdrawalKey(withdrawalId) }),
      });
      expect(created.status).toBe(200);

      const cases: [string, string, Record<string, string>, number][] = [
        ['replay', JSON.stringify({ request, idempotencyKey: withdrawalKey(withdrawalId) }), auth, 200],
        [
          'changed-amount',
          JSON.stringify({
            request: { ...request, amountMinor: '2000' },
            idempotencyKey: withdrawalKey(withdrawalId),
          }),
          auth,
          409,
        ],
        [
          'float-amount',
          JSON.stringify({ request: { ...request, amountMinor: '1.5' }, idempotencyKey: 'withdrawal-float' }),
          auth,
          400,
        ],
        ['no-key', JSON.stringify({ request, idempotencyKey: withdrawalKey(withdrawalId) }), {}, 401],
        ['too-large', JSON.stringify({ request: { ...request, memo: 'x'.repeat(8_000) } }), auth, 413],
      ];
      for (const [name, body, headers, status] of cases) {
        const { single, batch } = await bothWays(name, body, headers);
        expect(single.status, name).toBe(status);
        expect(single, name).toEqual(batch);
      }
    });

    it('refuses a malformed JSON body with VALIDATION, as tRPC does', async () => {
      const { single, batch } = await bothWays('malformed', '{"request":', {
        authorization: `Bearer ${served.fixtures.apiKey}`,
      });
      type Refusal = { error: { data: { code: string; requestId: string } } };
      expect(single.status).toBe(400);
      expect(batch.status).toBe(400);
      // The detail quotes the JSON parser, whose wording differs with the body's length.
      expect((single.body as Refusal).error.data).toMatchObject({
        code: 'VALIDATION',
        requestId: 'same-malformed',
      });
      expect((batch.body as Refusal).error.data).toMatchObject({
        code: 'VALIDATION',
        requestId: 'same-malformed',
      });
    });
  });

  describe('which requests the thin adapter takes', () => {
    const t = initTRPC.create();
    const router = t.router({
      echo: t.procedure
        .input(z.object({ said: z.string() }))
        .mutation(({ input }) => ({ heard: input.said })),
      ping: t.procedure.query(() => 'pong'),
      ticks: t.procedure.mutation(async function* () {
        yield 1;
      }),
    });
    const answered: string[] = [];
    let http: Server;
    let base: string;

    beforeAll(async () => {
      const single = createSingleCallHandler({
        router,
        basePath: '/trpc/',
        maxBodySize: 1024,
        createContext: () => ({}),
        onError: () => {},
      });
      http = createServer((req, res) => {
        const answer = single(req, res);
        if (answer) {
          answered.push(`${req.method} ${req.url}`);
          return;
        }
        res.statusCode = 418; // left to tRPC's adapter in the real server
        res.end();
      });
      await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(http.address() as AddressInfo).port}/trpc/`;
    });
    afterAll(() => new Promise<void>((resolve) => http.close(() => resolve())));

    it('takes an unbatched JSON mutation and answers in the tRPC envelope', async () => {
      const response = await fetch(`${base}echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json; charset=utf-8' },
        body: JSON.stringify({ said: 'hi' }),
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ result: { data: { heard: 'hi' } } });
      expect(answered).toContain('POST /trpc/echo');
    });

    it('refuses bad input with a typed tRPC error and an oversized body with 413', async () => {
      const bad = await fetch(`${base}echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ said: 42 }),
      });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { data: { code: string } } }).error.data.code).toBe(
        'BAD_REQUEST',
      );
      const big = await fetch(`${base}echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ said: 'x'.repeat(2_000) }),
      });
      expect(big.status).toBe(413);
    });

    it('refuses a streamed result with 415, as tRPC does outside a streaming link', async () => {
      const response = await fetch(`${base}ticks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(response.status).toBe(415);
      expect(((await response.json()) as { error: { data: { code: string } } }).error.data.code).toBe(
        'UNSUPPORTED_MEDIA_TYPE',
      );
    });

    it('leaves batches, queries, other content types and unknown paths to tRPC', async () => {
      const leftAlone = [
        fetch(`${base}echo?batch=1`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"0":{"said":"hi"}}',
        }),
        fetch(`${base}ping`),
        fetch(`${base}ping`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }),
        fetch(`${base}echo`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' }),
        fetch(`${base}echo`, { method: 'POST', body: '{}' }),
        fetch(`${base}nothing`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
        }),
        fetch(`${base}toString`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
        }),
      ];
      for (const response of await Promise.all(leftAlone)) expect(response.status).toBe(418);
    });
  });
});
