import { getBalances, withTenant } from '@idem/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Environment, ETH, startEnvironment } from './environment.ts';

let env: Environment;
beforeAll(async () => {
  env = await startEnvironment();
});
afterAll(() => env.close());

describe('a withdrawal from request to confirmation on a real chain', () => {
  it('is reviewed, signed, broadcast once and confirmed at depth; the hold is consumed', async () => {
    const op = await env.withdraw(ETH / 2n);
    const worker = env.worker();
    await worker.runOnce(); // review -> APPROVED -> SIGNED -> BROADCAST (auto-mined, 1 confirmation)
    const broadcast = await env.operation(op.operationId);
    expect(broadcast.state).toBe('BROADCAST');
    expect(broadcast.signedArtifact).toMatch(/^0x/);
    expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 2n);

    await worker.runOnce(); // depth 1 of 2: still BROADCAST
    expect((await env.operation(op.operationId)).state).toBe('BROADCAST');
    await env.mine(1);
    await worker.runOnce();
    expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
    const balances = await withTenant(env.t.db, env.tenantId, (tx) =>
      getBalances(tx, env.tenantId, 'acct-1'),
    );
    const eth = balances.find((b) => b.asset === 'ETH');
    expect(eth).toEqual({ asset: 'ETH', available: (1000n * ETH - ETH / 2n).toString(), held: '0' });
    expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 2n);
  });

  it('C09 two workers on the same approved withdrawals send each exactly once', async () => {
    const ops = await Promise.all(Array.from({ length: 6 }, () => env.withdraw(ETH / 100n)));
    const a = env.worker();
    const b = env.worker();
    await Promise.all([a.runOnce(), b.runOnce()]);
    await Promise.all([a.runOnce(), b.runOnce()]);
    for (const op of ops) {
      expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 100n);
      expect(['BROADCAST', 'CONFIRMED']).toContain((await env.operation(op.operationId)).state);
    }
  });
});
