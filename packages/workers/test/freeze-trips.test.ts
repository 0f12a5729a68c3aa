/**
 * The automatic freeze trips in the worker's pass (docs/GOVERNANCE.md "Automatic trips"): a
 * threshold crossed since the last pass freezes before the pass sends anything, says so as an
 * ALERT, and freezes once however many passes follow.
 */
import { randomBytes } from 'node:crypto';
import { listFreezes, setFreezeTrip, type Tx, withTenant } from '@idem/core';
import { staffMembers, strandWithdrawal } from '@idem/testing/tenants';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Environment, ETH, startEnvironment } from './environment.ts';

let env: Environment;
beforeAll(async () => {
  env = await startEnvironment();
});
afterAll(() => env.close());

const inTenant = <T>(work: (tx: Tx) => Promise<T>) => withTenant(env.t.db, env.tenantId, work);

const trippedAlerts = () =>
  env.logLines
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === 'ALERT automatic freeze tripped');

describe('I33-TRIP the worker measures the trips in its pass', () => {
  it('I33-TRIP a withdrawal gone UNKNOWN past the tenant threshold freezes it before the pass sends the next one, with one ALERT', async () => {
    const tenantId = env.tenantId;
    const [admin] = (await staffMembers(env.t.db, tenantId, 'admin', 1)) as [string];
    await inTenant((tx) =>
      setFreezeTrip(tx, {
        tenantId,
        actor: admin,
        settings: {
          assetCode: null,
          failuresMax: 0,
          failuresWindowSeconds: 600,
          outflowShareMaxPercent: null,
        },
      }),
    );
    const lost = await env.withdraw(ETH / 100n);
    await inTenant((tx) =>
      strandWithdrawal(tx, lost, 'UNKNOWN', { txHash: `0x${randomBytes(32).toString('hex')}` }),
    );
    const next = await env.withdraw(ETH / 100n);

    const worker = env.worker();
    const first = await worker.runOnce();
    expect(first.tripsFired).toBe(1);
    // Frozen before the dispatch stage: reviewed, not signed.
    expect((await env.operation(next.operationId)).state).toBe('APPROVED');
    const { freezes, held } = await inTenant((tx) => listFreezes(tx, tenantId));
    expect(freezes).toMatchObject([{ scope: 'tenant', frozenBy: 'system:trip:failures', liftedAt: null }]);
    expect(held.map((h) => h.operationId)).toEqual([next.operationId]);
    expect(trippedAlerts()).toMatchObject([
      { alert: true, tenantId, trip: 'failures', scope: 'tenant', freezeId: freezes[0]?.freezeId },
    ]);

    const second = await worker.runOnce();
    expect(second.tripsFired).toBe(0);
    expect(trippedAlerts()).toHaveLength(1);
    expect((await env.operation(next.operationId)).state).toBe('APPROVED');
    await worker.stop();
  });
});
