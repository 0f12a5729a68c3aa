import { GWEI, rpc } from '@idem/testing/chain';
import { createPublicClient, createWalletClient, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnvilInstance, anvilDevPrivateKeys, startAnvil } from '../src/evm/anvil.ts';
import { type FeeQuote, feePolicy, feesWithinCap, quoteFees, replacementFees } from '../src/evm/fees.ts';

let anvil: AnvilInstance;
beforeAll(async () => {
  anvil = await startAnvil({ chainId: 31337, mining: 'auto' });
});
afterAll(() => anvil.stop());

const quote = (base: bigint, priority: bigint, multiplier = 200n): FeeQuote => ({
  baseFeePerGas: base,
  maxFeePerGas: (base * multiplier) / 100n + priority,
  maxPriorityFeePerGas: priority,
  blockNumber: 1n,
});

describe('I12-FEES quoteFees reads the node', () => {
  it('I12-FEES the quote follows the pending base fee set with anvil_setNextBlockBaseFeePerGas and the policy', async () => {
    const client = createPublicClient({ transport: http(anvil.rpcUrl) });
    const policy = feePolicy({ baseFeeMultiplierPercent: 150, minPriorityFeeWei: 2n * GWEI });
    await rpc(anvil.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${(40n * GWEI).toString(16)}`]);
    const high = await quoteFees(client, policy);
    expect(high.baseFeePerGas).toBe(40n * GWEI);
    // Empty blocks only: the minimum priority fee.
    expect(high.maxPriorityFeePerGas).toBe(2n * GWEI);
    expect(high.maxFeePerGas).toBe(60n * GWEI + 2n * GWEI);
    await rpc(anvil.rpcUrl, 'anvil_mine', ['0x1']);
    // Read once the new head is visible (a CI run once saw the old head right after anvil_mine).
    await expect
      .poll(() => client.getBlockNumber({ cacheTime: 0 }), { timeout: 2_000, interval: 50 })
      .toBeGreaterThan(high.blockNumber);
    const after = await quoteFees(client, policy);
    // One empty block: the base fee falls by 12.5%.
    expect(after.baseFeePerGas).toBe(35n * GWEI);
    expect(after.blockNumber).toBe(high.blockNumber + 1n);
  });

  it('I12-FEES the priority fee is the percentile paid in recent blocks, within the policy bounds', async () => {
    const key = anvilDevPrivateKeys[4] as Hex;
    const account = privateKeyToAccount(key);
    const chain = {
      id: 31337,
      name: 'local',
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [anvil.rpcUrl] } },
    } as const;
    const wallet = createWalletClient({ account, chain, transport: http(anvil.rpcUrl) });
    const client = createPublicClient({ chain, transport: http(anvil.rpcUrl) });
    for (const tip of [3n, 3n, 3n]) {
      const hash = await wallet.sendTransaction({
        to: account.address,
        value: 1n,
        maxPriorityFeePerGas: tip * GWEI,
        maxFeePerGas: 200n * GWEI,
      });
      await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    }
    expect((await quoteFees(client, feePolicy({ historyBlocks: 3 }))).maxPriorityFeePerGas).toBe(3n * GWEI);
    expect(
      (await quoteFees(client, feePolicy({ historyBlocks: 3, maxPriorityFeeWei: GWEI })))
        .maxPriorityFeePerGas,
    ).toBe(GWEI);
  });
});

describe('I12-FEES fees under a cap and replacement fees', () => {
  const policy = feePolicy();
  it('I12-FEES the quote is used when it fits the total cap in wei; a cap that cannot pay the base fee plus headroom waits', () => {
    const q = quote(10n * GWEI, GWEI);
    expect(feesWithinCap(q, policy, { gasLimit: 21_000n, feeCapWei: null })).toEqual({
      ok: true,
      fees: { maxFeePerGas: 21n * GWEI, maxPriorityFeePerGas: GWEI },
    });
    // 15 gwei per gas: below the quote, above 11.3 + 1 gwei: signed at the cap.
    const capped = feesWithinCap(q, policy, { gasLimit: 21_000n, feeCapWei: 21_000n * 15n * GWEI });
    expect(capped).toEqual({ ok: true, fees: { maxFeePerGas: 15n * GWEI, maxPriorityFeePerGas: GWEI } });
    const waiting = feesWithinCap(q, policy, { gasLimit: 100_000n, feeCapWei: 100_000n * 12n * GWEI });
    expect(waiting.ok).toBe(false);
    if (!waiting.ok) expect(waiting.detail.requiredMaxFeePerGas).toBe(12_300_000_000n.toString());
    // The network ceiling applies with no cap at all.
    const spike = feesWithinCap(quote(1_000n * GWEI, GWEI), policy, { gasLimit: 21_000n, feeCapWei: null });
    expect(spike.ok).toBe(false);
  });

  it('I12-FEES a replacement raises both fees by at least 10% over the previous attempt, follows a higher quote, and stops at the cap', () => {
    const previous = { maxFeePerGas: 20n * GWEI, maxPriorityFeePerGas: GWEI };
    expect(replacementFees(previous, quote(GWEI, GWEI / 2n), policy)).toEqual({
      ok: true,
      fees: { maxFeePerGas: 22n * GWEI, maxPriorityFeePerGas: 1_100_000_000n },
    });
    // The node now asks for more than +10%: the quote wins.
    expect(replacementFees(previous, quote(20n * GWEI, 2n * GWEI), policy)).toEqual({
      ok: true,
      fees: { maxFeePerGas: 42n * GWEI, maxPriorityFeePerGas: 2n * GWEI },
    });
    // Rounded up: 10% of 15 wei is 1.5, so 17.
    expect(
      replacementFees({ maxFeePerGas: 15n, maxPriorityFeePerGas: 15n }, quote(0n, 0n), policy).fees,
    ).toEqual({
      maxFeePerGas: 17n,
      maxPriorityFeePerGas: 17n,
    });
    const capped = replacementFees(previous, quote(GWEI, GWEI / 2n), policy, {
      gasLimit: 21_000n,
      feeCapWei: 21_000n * 21n * GWEI,
    });
    expect(capped).toMatchObject({ ok: false, reason: 'above_cap', ceilingPerGas: 21n * GWEI });
  });

  it('I12-FEES a policy is validated', () => {
    expect(() => feePolicy({ minPriorityFeeWei: 2n, maxPriorityFeeWei: 1n })).toThrow(/minPriorityFeeWei/);
    expect(() => feePolicy({ replacementBumpPercent: 5 })).toThrow();
  });
});
