import { withTenant } from '@idem/core';
import { createCustodianAdapter } from '@idem/rails';
import { type FaultProxy, startFaultProxy } from '@idem/testing/chain';
import { provisionRiskPolicy, strandWithdrawal } from '@idem/testing/tenants';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, ETH, startEnvironment } from './environment.ts';

const BTC_DESTINATION = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';

let env: Environment;
let proxy: FaultProxy;

beforeAll(async () => {
  env = await startEnvironment({
    rpcUrl: async (anvilUrl) => {
      proxy = await startFaultProxy(anvilUrl);
      // The node's chain id (I32-CHAIN) and fees (I12-FEES) are read before signing: the faults start with the send.
      proxy.spareMethods = ['eth_chainId', 'eth_feeHistory'];
      return proxy.url;
    },
  });
});
afterAll(async () => {
  await proxy.close();
  await env.close();
});

/** A custodian withdrawal left UNKNOWN; its custodian cannot be reached, so it stays UNKNOWN. */
async function stuckAtCustodian(index: number): Promise<void> {
  const op = await env.withdraw(10_000n + BigInt(index), { asset: 'BTC', destination: BTC_DESTINATION });
  await withTenant(env.t.db, env.tenantId, (tx) =>
    strandWithdrawal(tx, op, 'UNKNOWN', { txHash: null, signedArtifact: '{}' }),
  );
}

describe('reconciliation is fair to every UNKNOWN withdrawal', () => {
  it('C14 a batch of withdrawals that cannot be resolved does not starve a newer one that can', async () => {
    // Many withdrawals from one account in an hour would (rightly) trip the velocity rule.
    await provisionRiskPolicy(env.t.db, {
      tenantId: env.tenantId,
      assetCode: 'ETH',
      autoApproveMaxMinor: (10n * ETH).toString(),
      fourEyesMinMinor: (100n * ETH).toString(),
      velocityMaxPerHour: 1_000,
      actor: 'test',
    });
    for (let i = 0; i < 25; i++) await stuckAtCustodian(i);
    const rails = {
      evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID },
      custodian: createCustodianAdapter({ baseUrl: 'http://127.0.0.1:9', timeoutMs: 200 }),
    };
    const first = env.worker({ rails, batchSize: 20 });
    // Two passes take the stuck withdrawals' own review items out of the way.
    await first.runOnce();
    await first.runOnce();
    // A newer on-chain withdrawal whose answer is lost after the node got it.
    const op = await env.withdraw(ETH / 77n);
    proxy.fault = 'forward-then-502';
    await first.runOnce();
    proxy.fault = 'none';
    expect((await env.operation(op.operationId)).state).toBe('UNKNOWN');
    const worker = env.worker({ rails, batchSize: 20 });
    for (let pass = 0; pass < 12 && (await env.operation(op.operationId)).state === 'UNKNOWN'; pass++) {
      await worker.runOnce();
    }
    expect(['BROADCAST', 'CONFIRMED']).toContain((await env.operation(op.operationId)).state);
  });
});
