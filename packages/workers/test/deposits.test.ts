import { listBreaks, withTenant } from '@idem/core';
import { anvilDevPrivateKeys } from '@idem/rails';
import { createWalletClient, getAddress, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Environment, ETH, rpc, startEnvironment } from './environment.ts';

let env: Environment;
const depositAddress = getAddress('0x1000000000000000000000000000000000000d0e');

beforeAll(async () => {
  env = await startEnvironment();
  await env.registerDepositAddress('ethereum', depositAddress, 'acct-dep');
});
afterAll(() => env.close());

const customer = () =>
  createWalletClient({
    account: privateKeyToAccount(anvilDevPrivateKeys[6] as Hex),
    transport: http(env.anvil.rpcUrl),
  });

const depositedEth = () => env.available('acct-dep', 'ETH');

describe('deposits seen on a real chain', () => {
  it('a deposit is credited once, and only at the asset confirmation depth', async () => {
    const worker = env.worker();
    await worker.runOnce(); // starts the scan cursor
    await customer().sendTransaction({ chain: null, to: depositAddress, value: ETH / 4n });
    await worker.runOnce();
    expect(await depositedEth()).toBe(0n); // 1 confirmation of 2
    await env.mine(1);
    await worker.runOnce();
    await worker.runOnce();
    expect(await depositedEth()).toBe(ETH / 4n);
    await env.mine(3);
    await worker.runOnce();
    expect(await depositedEth()).toBe(ETH / 4n);
  });

  it('C17 a credited deposit removed by a reorganisation is reversed by a compensating entry and raises a break', async () => {
    const worker = env.worker();
    const before = await depositedEth();
    await customer().sendTransaction({ chain: null, to: depositAddress, value: ETH / 8n });
    await env.mine(1);
    await worker.runOnce();
    await worker.runOnce();
    expect(await depositedEth()).toBe(before + ETH / 8n);
    // Replace the last blocks, including the deposit's, with empty ones and drop it from the pool.
    await rpc(env.anvil.rpcUrl, 'evm_setAutomine', [false]);
    await rpc(env.anvil.rpcUrl, 'anvil_reorg', [3, []]);
    const txpool = (await rpc(env.anvil.rpcUrl, 'txpool_content')) as {
      pending: Record<string, Record<string, { hash: string }>>;
    };
    for (const byNonce of Object.values(txpool.pending)) {
      for (const tx of Object.values(byNonce))
        await rpc(env.anvil.rpcUrl, 'anvil_dropTransaction', [tx.hash]);
    }
    await rpc(env.anvil.rpcUrl, 'evm_setAutomine', [true]);
    // A reorganisation is acted on when seen again on a later pass, with the chain moved on.
    await worker.runOnce();
    await env.mine(1);
    await worker.runOnce();
    expect(await depositedEth()).toBe(before);
    const breaks = await withTenant(env.t.db, env.tenantId, (tx) =>
      listBreaks(tx, { tenantId: env.tenantId, status: 'open' }),
    );
    expect(breaks.some((b) => b.details && JSON.stringify(b.details).includes('reorganised out'))).toBe(true);
  });
});
