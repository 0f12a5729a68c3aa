import { createIdemClient, IdemApiError, withdrawalKey } from '@idem/sdk';
import { describe, expect, it } from 'vitest';
import { evmAddress, provisionTenant, type TenantFixture, uniqueId } from './support/provision.ts';
import { serveForTests } from './support/served.ts';

/** A per-tenant token bucket: 1 request per second, bursts of 2 (IDEM_RATE_LIMIT_PER_SECOND=1). */
describe('rate limit per tenant', () => {
  const served = serveForTests({
    env: { IDEM_RATE_LIMIT_PER_SECOND: '1' },
    provision: async (db) => ({
      busy: await provisionTenant(db, { name: 'Busy Exchange' }),
      quiet: await provisionTenant(db, { name: 'Quiet Exchange' }),
      patient: await provisionTenant(db, { name: 'Patient Exchange' }),
    }),
  });

  const submit = (tenant: TenantFixture, withdrawalId: string) =>
    fetch(`${served.server.baseUrl}/trpc/withdrawals.submit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        request: {
          withdrawalId,
          accountId: 'cust-7',
          asset: 'ETH',
          destination: evmAddress(),
          amountMinor: '1000',
        },
        idempotencyKey: withdrawalKey(withdrawalId),
      }),
    });

  it('refuses a tenant over its rate with RATE_LIMITED and retryAfterMs, writes nothing, and spares other tenants', async () => {
    const ids = Array.from({ length: 5 }, () => uniqueId('burst'));
    const answers = [];
    for (const id of ids) answers.push(await submit(served.fixtures.busy, id));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.slice(0, 2)).toEqual([200, 200]); // the burst
    expect(statuses.slice(2)).toEqual([429, 429, 429]);
    const refused = (await answers[4]?.json()) as {
      error: { data: { code: string; retryAfterMs: number; status: number } };
    };
    expect(refused.error.data).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
    expect(refused.error.data.retryAfterMs).toBeGreaterThan(0);
    expect(refused.error.data.retryAfterMs).toBeLessThanOrEqual(1_000);

    // Another tenant's bucket is its own.
    expect((await submit(served.fixtures.quiet, uniqueId('quiet'))).status).toBe(200);

    // A refused submission was never created: reading it back finds nothing.
    const idem = createIdemClient({ baseUrl: served.server.baseUrl, apiKey: served.fixtures.busy.apiKey });
    // Fixed: the lookup needs a token; the bucket refills in the server's memory, on its clock, in
    // retryAfterMs (no row to move back; polling would only spend more refusals).
    await new Promise((resolve) => setTimeout(resolve, refused.error.data.retryAfterMs));
    const lookup = await idem.withdrawals.get(ids[4] ?? '').catch((error: unknown) => error);
    expect(lookup).toBeInstanceOf(IdemApiError);
    expect((lookup as IdemApiError).code).toBe('NOT_FOUND');
  });

  it('the SDK waits out RATE_LIMITED and retries with the same key', async () => {
    // A tenant of its own, so its bucket starts full whatever the test before spent.
    const idem = createIdemClient({ baseUrl: served.server.baseUrl, apiKey: served.fixtures.patient.apiKey });
    // Drain the bucket, then submit through the SDK: it must succeed after waiting.
    for (let i = 0; i < 2; i += 1) {
      expect((await submit(served.fixtures.patient, uniqueId('drain'))).status).toBe(200);
    }
    const refusalsBefore = refusalsLogged();
    const withdrawalId = uniqueId('patient');
    const { outcome } = await idem.withdrawals.submit(
      { withdrawalId, accountId: 'cust-7', asset: 'ETH', destination: evmAddress(), amountMinor: '1000' },
      withdrawalKey(withdrawalId),
    );
    expect(outcome).toBe('CREATED');
    // Its first attempt was refused (the access log says so), and the retry created it once.
    await expect.poll(refusalsLogged, { timeout: 2_000, interval: 50 }).toBeGreaterThan(refusalsBefore);
  });

  function refusalsLogged(): number {
    return served.server.output.join('').split('"errorCode":"RATE_LIMITED"').length - 1;
  }
});
