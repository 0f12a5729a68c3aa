/**
 * A worker whose pass never ends moves nothing and would say nothing: the chaos failover drill
 * once ended with every withdrawal REQUESTED and both workers alive and silent. A pass that runs
 * past `stallAlertMs` is reported once, as an ALERT naming the stage and tenant it is stuck in.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Environment, ETH, startEnvironment, testClock } from './environment.ts';

let env: Environment;
beforeAll(async () => {
  env = await startEnvironment();
});
afterAll(() => env.close());

const stalledAlerts = () =>
  env.logLines
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === 'ALERT worker pass stalled');

describe('a worker pass that never ends', () => {
  it('is reported once as an ALERT with its stage and tenant, and not before stallAlertMs', async () => {
    await env.withdraw(ETH / 20n);
    let reachedSigner = false;
    let release: () => void = () => {};
    // The send path's probe does not return once the signer has answered: the dispatch stage hangs
    // until the end of the test.
    // A minute on a test clock: however slow the pass is to reach the signer, it is not stalled yet.
    const clock = testClock();
    const worker = env.worker({
      now: clock.now,
      stallAlertMs: 60_000,
      probe: (step) => {
        if (step !== 'signer-answered') return Promise.resolve();
        reachedSigner = true;
        return new Promise<void>((resolve) => {
          release = resolve;
        });
      },
    });
    worker.start(50);
    await expect.poll(() => reachedSigner, { timeout: 10_000, interval: 20 }).toBe(true);
    expect(stalledAlerts()).toEqual([]);

    clock.advance(61_000);
    await vi.waitFor(() => expect(stalledAlerts().length).toBeGreaterThan(0), {
      timeout: 10_000,
      interval: 50,
    });
    // A few more watchdog ticks (one a second), an hour later: once per stalled pass, however long.
    // Fixed: a second alert that does not come cannot be polled for, and the ticks show nowhere.
    clock.advance(3_600_000);
    await new Promise((r) => setTimeout(r, 2_500));
    const alerts = stalledAlerts();
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({ alert: true, stage: 'dispatch', tenantId: env.tenantId });
    expect(alerts[0]?.runningForMs).toBeGreaterThanOrEqual(60_000);
    release();
    await worker.stop();
  });
});
