import { type Database, submitWithdrawal, withTenant } from '@idem/core';
import { createIdemClient, IdemApiError, withdrawalKey } from '@idem/sdk';
import { strandWithdrawal } from '@idem/testing/tenants';
import { describe, expect, it, vi } from 'vitest';
import { evmAddress, provisionTenant, uniqueId } from './support/provision.ts';
import { serveForTests } from './support/served.ts';

const METRICS_TOKEN = 'observability-test-metrics-token';
const CACHE_MS = 3_000;

async function scrape(baseUrl: string, token: string | null = METRICS_TOKEN): Promise<Response> {
  return fetch(`${baseUrl}/metrics`, token === null ? {} : { headers: { authorization: `Bearer ${token}` } });
}

/** The REQUESTED gauge of one scrape. */
function requestedIn(text: string): number {
  return Number(/^idem_operations\{state="REQUESTED"\} (\d+)$/m.exec(text)?.[1]);
}

describe('observability', () => {
  const served = serveForTests({
    env: { LOG_LEVEL: 'debug', IDEM_METRICS_TOKEN: METRICS_TOKEN, IDEM_METRICS_CACHE_MS: String(CACHE_MS) },
    provision: async (db) => {
      const tenant = await provisionTenant(db);
      await stuckWithdrawal(db, tenant.tenantId, 'UNKNOWN');
      await stuckWithdrawal(db, tenant.tenantId, 'FAILED_TERMINAL');
      await stuckWithdrawal(db, tenant.tenantId, 'BROADCAST');
      return tenant;
    },
  });

  async function logLinesFor(requestIds: string[]): Promise<string> {
    // Logs are written asynchronously: wait until every request's access line is there.
    return vi.waitFor(
      () => {
        const text = served.server.output.join('');
        if (!requestIds.every((id) => text.includes(id)))
          throw new Error(`log lines missing for ${requestIds.join(', ')}`);
        return text;
      },
      { timeout: 5_000, interval: 50 },
    );
  }

  it('C23 a submitted key, destination and memo never appear in the logs in clear', async () => {
    const idem = createIdemClient({ baseUrl: served.server.baseUrl, apiKey: served.fixtures.apiKey });
    const withdrawalId = uniqueId('wd');
    const key = withdrawalKey(withdrawalId);
    const destination = evmAddress();
    const memo = `memo-${uniqueId('private')}`;
    const request = {
      withdrawalId,
      accountId: 'cust-7',
      asset: 'ETH',
      destination,
      memo,
      amountMinor: '1000',
    };
    const requestIds: string[] = [];
    const remember = (error: unknown) => {
      if (error instanceof IdemApiError) requestIds.push(error.problem.requestId);
      return error;
    };

    await idem.withdrawals.submit(request, key); // created
    await idem.withdrawals.submit(request, key); // replayed
    // A conflict whose answer names the holding key, a changed payload, a bad destination, and a
    // request carrying a wrong API key: the paths where a value is most tempting to log.
    const conflict = remember(await idem.withdrawals.submit(request, `${key}-2`).catch((e) => e));
    expect((conflict as IdemApiError).problem.holderKey).toBe(key);
    remember(await idem.withdrawals.submit({ ...request, amountMinor: '1' }, key).catch((e) => e));
    remember(
      await idem.withdrawals.submit({ ...request, destination: `${destination}00` }, key).catch((e) => e),
    );
    const stranger = createIdemClient({
      baseUrl: served.server.baseUrl,
      apiKey: `${served.fixtures.apiKey.slice(0, -4)}AAAA`,
    });
    remember(await stranger.assets.list().catch((e) => e));
    expect(requestIds).toHaveLength(4);

    const logs = await logLinesFor(requestIds);
    // The logs did capture these requests (so absence below is meaningful)...
    expect(logs).toContain(served.fixtures.tenantId);
    expect(logs).toMatch(/"errorCode":"IDEMPOTENCY_CONFLICT"/);
    // ...and none of the values, nor the API key's secret, in any case.
    for (const secret of [
      key,
      destination,
      destination.toLowerCase(),
      memo,
      served.fixtures.apiKey.slice(-43),
    ]) {
      expect(logs.includes(secret), `log contains ${secret}`).toBe(false);
    }
  });

  it('serves liveness, readiness and Prometheus metrics (I12-STUCK: the BROADCAST age too)', async () => {
    expect((await fetch(`${served.server.baseUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${served.server.baseUrl}/readyz`)).status).toBe(200);
    const metrics = await (await scrape(served.server.baseUrl)).text();
    expect(metrics).toMatch(/idem_operations\{state="REQUESTED"\} [1-9]/);
    expect(metrics).toMatch(/idem_operations\{state="CONFIRMED"\} [1-9]/); // the funding deposit
    // One withdrawal of each state that needs an owner was left there before the server started.
    expect(metrics).toMatch(/idem_operations\{state="UNKNOWN"\} 1\n/);
    expect(metrics).toMatch(/idem_operations\{state="FAILED_TERMINAL"\} 1\n/);
    expect(metrics).toMatch(/idem_operations\{state="BROADCAST"\} 1\n/);
    // I12-STUCK a BROADCAST not mined shows its age too.
    for (const state of ['UNKNOWN', 'FAILED_TERMINAL', 'BROADCAST']) {
      const age = new RegExp(`idem_operation_oldest_age_seconds\\{state="${state}"\\} ([0-9.e-]+)`).exec(
        metrics,
      );
      expect(Number(age?.[1]), state).toBeGreaterThan(0);
    }
    expect(metrics).toMatch(
      /idem_http_request_duration_seconds_bucket\{le="0.025",route="trpc:withdrawals.submit"/,
    );
    expect(metrics).toMatch(/idem_metrics_database_errors 0/);
  });

  it('I11-F9 /metrics refuses a scrape without the bearer token, or with a wrong one', async () => {
    const base = served.server.baseUrl;
    const anonymous = await scrape(base, null);
    expect(anonymous.status).toBe(401);
    expect(await anonymous.text()).not.toContain('idem_operations');
    expect((await scrape(base, 'not-the-token')).status).toBe(401);
    expect((await scrape(base, `${METRICS_TOKEN}x`)).status).toBe(401);
    const allowed = await scrape(base);
    expect(allowed.status).toBe(200);
    expect(await allowed.text()).toMatch(/^idem_operations\{state="REQUESTED"\} \d+$/m);
  });

  it('I11-F9 concurrent scrapes share one cached aggregate per interval; a scrape after it sees the change', async () => {
    const base = served.server.baseUrl;
    const idem = createIdemClient({ baseUrl: base, apiKey: served.fixtures.apiKey });
    // Fixed: wait out any read cached by earlier tests, then take a fresh one. The cache is the
    // server's memory on its own clock (no row to move back), and its interval is what is tested.
    await new Promise((resolve) => setTimeout(resolve, CACHE_MS + 100));
    // The server's read starts between these two instants: the burst below must end before the
    // first plus the interval, the last scrape must start after the second plus the interval.
    const cachedAt = Date.now();
    const before = requestedIn(await (await scrape(base)).text());
    const answeredAt = Date.now();
    expect(before).toBeGreaterThan(0);

    // The database changes: one more REQUESTED withdrawal.
    const withdrawalId = uniqueId('wd');
    await idem.withdrawals.submit(
      { withdrawalId, accountId: 'cust-7', asset: 'ETH', destination: evmAddress(), amountMinor: '7' },
      withdrawalKey(withdrawalId),
    );
    // Fifty scrapes at once, within the interval: all answer the cached aggregate, so none of them
    // read the database (a read would have seen the new withdrawal).
    const burst = await Promise.all(Array.from({ length: 50 }, async () => (await scrape(base)).text()));
    expect(Date.now() - cachedAt).toBeLessThan(CACHE_MS);
    expect(burst.map(requestedIn)).toEqual(burst.map(() => before));

    // After the interval, the next scrape reads again and sees it (fixed: the interval itself).
    await new Promise((resolve) => setTimeout(resolve, CACHE_MS + 100 - (Date.now() - answeredAt)));
    expect(requestedIn(await (await scrape(base)).text())).toBe(before + 1);
  });
});

/** A withdrawal left in UNKNOWN, FAILED_TERMINAL or BROADCAST (not mined), as a worker would leave it. */
async function stuckWithdrawal(
  db: Database,
  tenantId: string,
  to: 'UNKNOWN' | 'FAILED_TERMINAL' | 'BROADCAST',
) {
  const withdrawalId = uniqueId('stuck');
  const { operation } = await submitWithdrawal(db, {
    tenantId,
    request: { withdrawalId, accountId: 'cust-7', asset: 'ETH', destination: evmAddress(), amountMinor: '1' },
    idempotencyKey: withdrawalKey(withdrawalId),
    actor: 'test',
  });
  await withTenant(db, tenantId, (tx) => strandWithdrawal(tx, operation, to));
}
