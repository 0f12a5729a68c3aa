import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { withdrawalKey } from '@idem/sdk';
import createClient from 'openapi-fetch';
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../src/rest/openapi.ts';
import type { paths } from './generated/idem-openapi.ts';
import { GENERATED_TYPES, generatedTypes } from './support/openapi-types.ts';
import { ETH, evmAddress, provisionTenant, uniqueId } from './support/provision.ts';
import { serveForTests } from './support/served.ts';

const run = promisify(execFile);
const redocly = fileURLToPath(new URL('../node_modules/.bin/redocly', import.meta.url));

describe('I15 the OpenAPI document', () => {
  it('I15 passes the Redocly linter (recommended rules) with no error and no warning', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'idem-openapi-')), 'openapi.json');
    writeFileSync(file, JSON.stringify(openApiDocument(), null, 2));
    const { stdout, stderr } = await run(redocly, ['lint', file], {
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    });
    const output = `${stdout}\n${stderr}`;
    expect(output).toContain('Your API description is valid');
    expect(output).not.toMatch(/You have \d+ warning/);
  }, 60_000);

  it('I15 is OpenAPI 3.1 and describes the outbound webhook with its Standard Webhooks headers', () => {
    const document = openApiDocument() as {
      openapi: string;
      webhooks: Record<string, { post: { parameters: { name: string; in: string }[] } }>;
    };
    expect(document.openapi).toBe('3.1.0');
    const headers = document.webhooks['operation.state_changed']?.post.parameters.map((p) => p.name);
    expect(headers).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
  });

  it('I15 the committed client types are what openapi-typescript generates from today’s document', async () => {
    // If this fails: pnpm --filter @idem/server openapi:types, then review and commit the change.
    expect(readFileSync(GENERATED_TYPES, 'utf8')).toBe(await generatedTypes());
  });
});

describe('I15 an integrator’s generated client (openapi-typescript + openapi-fetch)', () => {
  const served = serveForTests({
    provision: async (db) => ({
      a: await provisionTenant(db, { name: 'Exchange A' }),
      b: await provisionTenant(db, { name: 'Exchange B' }),
    }),
  });
  const clientFor = (apiKey: string) =>
    createClient<paths>({ baseUrl: served.server.baseUrl, headers: { authorization: `Bearer ${apiKey}` } });

  it('I15 C03 C04 submit, replay, changed payload, second key, missing key, unknown, other tenant, bad amount', async () => {
    const idem = clientFor(served.fixtures.a.apiKey);
    const other = clientFor(served.fixtures.b.apiKey);
    const body = {
      withdrawalId: uniqueId('wd'),
      accountId: 'cust-7',
      asset: 'ETH',
      destination: evmAddress(),
      amountMinor: (ETH / 50n).toString(),
    };
    const key = withdrawalKey(body.withdrawalId);
    const submit = (request: typeof body, idempotencyKey: string) =>
      idem.POST('/v1/withdrawals', {
        params: { header: { 'Idempotency-Key': idempotencyKey } },
        body: request,
      });

    const created = await submit(body, key);
    expect(created.response.status).toBe(201);
    expect(created.data?.outcome).toBe('CREATED');

    const replayed = await submit(body, key);
    expect(replayed.response.status).toBe(200);
    expect(replayed.response.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.data?.withdrawal.operationId).toBe(created.data?.withdrawal.operationId);

    const changed = await submit({ ...body, amountMinor: '999' }, key);
    expect(changed.response.status).toBe(422);
    expect(changed.error?.code).toBe('IDEMPOTENCY_CONFLICT');

    const secondKey = await submit(body, `${key}-2`);
    expect(secondKey.response.status).toBe(409);
    expect(secondKey.error).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', holderKey: key });

    const missingKey = await idem.POST('/v1/withdrawals', {
      params: { header: {} as { 'Idempotency-Key': string } },
      body,
    });
    expect(missingKey.response.status).toBe(400);
    expect(missingKey.error?.code).toBe('VALIDATION');

    const unknown = await idem.GET('/v1/withdrawals/{withdrawalId}', {
      params: { path: { withdrawalId: 'never-submitted' } },
    });
    expect(unknown.response.status).toBe(404);
    expect(unknown.error?.code).toBe('NOT_FOUND');

    const theirs = await other.GET('/v1/withdrawals/{withdrawalId}', {
      params: { path: { withdrawalId: body.withdrawalId } },
    });
    expect(theirs.response.status).toBe(404);

    const bad = { ...body, withdrawalId: uniqueId('wd'), amountMinor: '0.5' };
    const refused = await submit(bad, withdrawalKey(bad.withdrawalId));
    expect(refused.response.status).toBe(400);
    expect(refused.error?.code).toBe('VALIDATION');
    // Nothing written: neither the id nor the key holds anything.
    const byId = await idem.GET('/v1/withdrawals/{withdrawalId}', {
      params: { path: { withdrawalId: bad.withdrawalId } },
    });
    expect(byId.response.status).toBe(404);
    const byKey = await idem.GET('/v1/idempotency-keys/{key}', {
      params: { path: { key: withdrawalKey(bad.withdrawalId) } },
    });
    expect(byKey.response.status).toBe(404);

    const found = await idem.GET('/v1/idempotency-keys/{key}', { params: { path: { key } } });
    expect(found.data?.operationId).toBe(created.data?.withdrawal.operationId);
  });
  it('I17 a batch through the generated client: typed per-item results, in order', async () => {
    const idem = clientFor(served.fixtures.a.apiKey);
    const request = (amountMinor: string) => ({
      withdrawalId: uniqueId('wd'),
      accountId: 'cust-7',
      asset: 'ETH',
      destination: evmAddress(),
      amountMinor,
    });
    const [first, second] = [request('1000'), request('0')];
    const { data, response } = await idem.POST('/v1/withdrawal-batches', {
      body: {
        items: [first, second].map((body) => ({
          idempotencyKey: withdrawalKey(body.withdrawalId),
          request: body,
        })),
      },
    });
    expect(response.status).toBe(200);
    const [created, refused] = data?.results ?? [];
    expect(created && 'outcome' in created ? created.withdrawal.reference : null).toBe(first.withdrawalId);
    expect(refused && 'error' in refused ? refused.error.code : null).toBe('VALIDATION');
  });
});
