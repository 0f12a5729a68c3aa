import { createIdemClient, IdemApiError, withdrawalKey } from '@idem/sdk';
import { describe, expect, it } from 'vitest';
import { ETH, onPostgres, provisionTenant, withdrawalBody } from './support/provision.ts';
import { restClient } from './support/rest.ts';
import { serveForTests } from './support/served.ts';

/**
 * The dry run over both faces (I33-PREVIEW): `POST /v1/withdrawals/preview` and the SDK's
 * `withdrawals.preview` answer the decision the tenant's policy would make, and leave the key and
 * the withdrawal id free for the real submission.
 */
const request = withdrawalBody;

describe('I33-PREVIEW the dry run over REST and the SDK', () => {
  const served = serveForTests({
    kind: onPostgres ? 'postgres' : 'pglite',
    provision: (db) => provisionTenant(db, { name: 'Preview Exchange' }),
  });

  it('I33-PREVIEW REST answers 200 with the decision (a tenant without rules reviews every withdrawal with one approver) and the balance after; the same key then creates the withdrawal (201)', async () => {
    const { call } = await restClient(served.server.baseUrl);
    const { apiKey } = served.fixtures;
    const body = request();
    const key = withdrawalKey(body.withdrawalId);
    const preview = await call('POST', '/v1/withdrawals/preview', {
      apiKey,
      body: { request: body, idempotencyKey: key },
    });
    expect(preview.status, JSON.stringify(preview.body)).toBe(200);
    expect(preview.body).toMatchObject({
      decision: 'REVIEW',
      approvalsRequired: 1,
      reasons: ['amount_above_auto_approve'],
      availableMinor: (100n * ETH).toString(),
      balanceAfterMinor: (100n * ETH - ETH / 100n).toString(),
      heldByFreeze: false,
      alreadySubmitted: null,
    });
    const created = await call('POST', '/v1/withdrawals', {
      apiKey,
      body,
      headers: { 'idempotency-key': key },
    });
    expect(created.status).toBe(201);
  });

  it('I33-PREVIEW REST: DENY with INSUFFICIENT_FUNDS beyond the balance; 400 VALIDATION for a request a submission would refuse', async () => {
    const { call } = await restClient(served.server.baseUrl);
    const { apiKey } = served.fixtures;
    const denied = await call('POST', '/v1/withdrawals/preview', {
      apiKey,
      body: { request: request({ amountMinor: (1000n * ETH).toString() }) },
    });
    expect(denied.status).toBe(200);
    expect(denied.body).toMatchObject({ decision: 'DENY', reasons: ['INSUFFICIENT_FUNDS'] });
    const invalid = await call('POST', '/v1/withdrawals/preview', {
      apiKey,
      body: { request: request({ destination: 'nowhere' }) },
    });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({ code: 'VALIDATION' });
  });

  it('I33-PREVIEW the SDK previews, and after the submission the preview names the withdrawal that holds the id', async () => {
    const { apiKey } = served.fixtures;
    const sdk = createIdemClient({ baseUrl: served.server.baseUrl, apiKey });
    const body = request();
    expect(await sdk.withdrawals.preview(body)).toMatchObject({ decision: 'REVIEW', alreadySubmitted: null });
    const { withdrawal } = await sdk.withdrawals.submit(body, withdrawalKey(body.withdrawalId));
    expect(await sdk.withdrawals.preview(body)).toMatchObject({
      alreadySubmitted: {
        operationId: withdrawal.operationId,
        idempotencyKey: withdrawalKey(body.withdrawalId),
      },
    });
    const refused = await sdk.withdrawals
      .preview({ ...body, amountMinor: '-1' })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(IdemApiError);
    expect((refused as IdemApiError).code).toBe('VALIDATION');
  });
});
