import { expireLease, onPostgres } from '@idem/testing/database';
import type { Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SendStep } from '../src/context.ts';
import { CHAIN_ID, type Environment, ETH, startEnvironment } from './environment.ts';
import { killWorkerAt as killWorker } from './processes/kill-worker.ts';

const LEASE_MS = 1_500;

let env: Environment;
beforeAll(async () => {
  env = await startEnvironment();
});
afterAll(() => env.close());

/** Runs a worker process until it reports being stopped at `step`, then kills it with SIGKILL. */
function killWorkerAt(step: SendStep): Promise<void> {
  return killWorker({
    databaseUrl: env.t.url ?? '',
    rpcUrl: env.rpcUrl,
    chainId: CHAIN_ID,
    step,
    leaseMs: LEASE_MS,
  });
}

async function transactionsFromHotWallet(): Promise<number> {
  return env.chain.getTransactionCount({ address: env.hotWallet as Hex, blockTag: 'latest' });
}

describe.skipIf(!onPostgres)(
  'a worker killed with SIGKILL in the send path (real PostgreSQL, real anvil)',
  () => {
    it('C12 killed after signing, before broadcasting: recovery sends the stored bytes, no second signature', async () => {
      const op = await env.withdraw(ETH / 7n);
      const sentBefore = await transactionsFromHotWallet();
      await killWorkerAt('signed');
      const signed = await env.operation(op.operationId);
      expect(signed.state).toBe('SIGNED');
      expect(await env.balanceOf(op.destination ?? '')).toBe(0n);

      // The crashed worker's lease lapses before a rescuer may take it: moved back on the database's
      // clock rather than waited for.
      await expireLease(env.t.db, op.operationId);
      const rescuer = env.worker();
      await rescuer.runOnce();
      const resumed = await env.operation(op.operationId);
      expect(resumed.state).toBe('BROADCAST');
      expect(resumed.signedArtifact).toBe(signed.signedArtifact);
      expect(resumed.txHash).toBe(signed.txHash);
      expect(await transactionsFromHotWallet()).toBe(sentBefore + 1);
      expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 7n);
    });

    it('C12 killed after broadcasting, before recording it: exactly one transfer on chain', async () => {
      const op = await env.withdraw(ETH / 9n);
      const sentBefore = await transactionsFromHotWallet();
      await killWorkerAt('broadcast-returned');
      const signed = await env.operation(op.operationId);
      expect(signed.state).toBe('SIGNED');
      expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 9n);

      // The crashed worker's lease lapses before a rescuer may take it: moved back on the database's
      // clock rather than waited for.
      await expireLease(env.t.db, op.operationId);
      const rescuer = env.worker();
      await rescuer.runOnce();
      await env.mine(2);
      await rescuer.runOnce();
      const final = await env.operation(op.operationId);
      expect(final.state).toBe('CONFIRMED');
      expect(final.txHash).toBe(signed.txHash);
      expect(await transactionsFromHotWallet()).toBe(sentBefore + 1);
      expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 9n);
    });
  },
);
