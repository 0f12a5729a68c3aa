import { claim, type Database, recordSigned, submitWithdrawal, transition, withTenant } from '@idem/core';
import { createIdemClient, IdemApiError, withdrawalKey } from '@idem/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Backend,
  createBackend,
  disposeBackend,
  evmAddress,
  provisionTenant,
  type TenantFixture,
  uniqueId,
  withDirectDatabase,
} from './support/provision.ts';
import { type ServerProcess, startServerProcess } from './support/server-process.ts';

describe('observability', () => {
  let backend: Backend;
  let tenant: TenantFixture;
  let server: ServerProcess;

  beforeAll(async () => {
    backend = await createBackend('pglite');
    await withDirectDatabase(backend, async (db) => {
      tenant = await provisionTenant(db);
      await stuckWithdrawal(db, tenant.tenantId, 'UNKNOWN');
      await stuckWithdrawal(db, tenant.tenantId, 'FAILED_TERMINAL');
    });
    server = await startServerProcess({ ...backend.env, LOG_LEVEL: 'debug' });
  });
  afterAll(async () => {
    await server?.stop();
    if (backend) await disposeBackend(backend);
  });

  async function logLinesFor(requestIds: string[]): Promise<string> {
    // Logs are written asynchronously: wait until every request's access line is there.
    for (let waited = 0; waited < 5_000; waited += 50) {
      const text = server.output.join('');
      if (requestIds.every((id) => text.includes(id))) return text;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`log lines missing for ${requestIds.join(', ')}`);
  }

  it('C23 a submitted key, destination and memo never appear in the logs in clear', async () => {
    const idem = createIdemClient({ baseUrl: server.baseUrl, apiKey: tenant.apiKey });
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
      baseUrl: server.baseUrl,
      apiKey: `${tenant.apiKey.slice(0, -4)}AAAA`,
    });
    remember(await stranger.assets.list().catch((e) => e));
    expect(requestIds).toHaveLength(4);

    const logs = await logLinesFor(requestIds);
    // The logs did capture these requests (so absence below is meaningful)...
    expect(logs).toContain(tenant.tenantId);
    expect(logs).toMatch(/"errorCode":"IDEMPOTENCY_CONFLICT"/);
    // ...and none of the values, nor the API key's secret, in any case.
    for (const secret of [key, destination, destination.toLowerCase(), memo, tenant.apiKey.slice(-43)]) {
      expect(logs.includes(secret), `log contains ${secret}`).toBe(false);
    }
  });

  it('serves liveness, readiness and Prometheus metrics', async () => {
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${server.baseUrl}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/idem_operations\{state="REQUESTED"\} [1-9]/);
    expect(metrics).toMatch(/idem_operations\{state="CONFIRMED"\} [1-9]/); // the funding deposit
    // One withdrawal of each state that needs an owner was left there before the server started.
    expect(metrics).toMatch(/idem_operations\{state="UNKNOWN"\} 1\n/);
    expect(metrics).toMatch(/idem_operations\{state="FAILED_TERMINAL"\} 1\n/);
    for (const state of ['UNKNOWN', 'FAILED_TERMINAL']) {
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
});

/** A withdrawal driven to UNKNOWN or FAILED_TERMINAL the way a worker would. */
async function stuckWithdrawal(db: Database, tenantId: string, to: 'UNKNOWN' | 'FAILED_TERMINAL') {
  const withdrawalId = uniqueId('stuck');
  const { operation } = await submitWithdrawal(db, {
    tenantId,
    request: { withdrawalId, accountId: 'cust-7', asset: 'ETH', destination: evmAddress(), amountMinor: '1' },
    idempotencyKey: withdrawalKey(withdrawalId),
    actor: 'test',
  });
  await withTenant(db, tenantId, async (tx) => {
    const approved = await transition(tx, operation, 'APPROVED', { actor: 'staff:a', reason: 'ok' });
    const claimed = await claim(tx, { operation: approved, workerId: 'w', leaseMs: 30_000 });
    if (!claimed) throw new Error('claim lost');
    const signed = await recordSigned(tx, {
      tenantId,
      operationId: approved.operationId,
      leaseGeneration: claimed.leaseGeneration,
      signedArtifact: '0xbytes',
      txHash: `0x${'ab'.repeat(32)}`,
      workerId: 'w',
    });
    if (to === 'UNKNOWN') return transition(tx, signed, 'UNKNOWN', { actor: 'w', reason: 'timeout' });
    const broadcast = await transition(tx, signed, 'BROADCAST', { actor: 'w', reason: 'sent' });
    return transition(tx, broadcast, 'FAILED_TERMINAL', {
      actor: 'w',
      reason: 'reverted',
      set: { owner: 'ops' },
    });
  });
}
