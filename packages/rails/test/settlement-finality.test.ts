/**
 * Manual resolution's proof that nothing of ours can still pay (I32-FINAL), against a real anvil.
 * Releasing a hold cannot be taken back once the customer has spent the funds, so "not sent"
 * because a transaction took our nonce is proven only once that transaction is in a block the node
 * calls finalized: a reorganisation deeper than the asset's confirmation depth but above finality
 * could swap it for our signed payment. The confirmation depth is 3 here; anvil finalizes a fixed
 * number of blocks behind its head (64), measured below rather than assumed.
 */
import { rpc, startFaultProxy } from '@idem/testing/chain';
import { approvalFor } from '@idem/testing/signer';
import { type Address, createPublicClient, createWalletClient, type Hex, http } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnvilInstance, anvilDevPrivateKeys, startAnvil } from '../src/evm/anvil.ts';
import { createEvmRail, type EvmRail } from '../src/evm/rail.ts';
import { deployTestToken } from '../src/evm/test-token.ts';
import type { EvmSettlementRequest, EvmSignRequestInput } from '../src/evm/types.ts';

const chainId = 31337;
const depth = 3;
const fees = { gasLimit: 21_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };
const freshAddress = (): Address => privateKeyToAccount(generatePrivateKey()).address;
/** The native payment the stuck withdrawals here were for. */
const nativeTransfer = { asset: 'native', to: freshAddress(), amountMinor: 7000n } as const;

let anvil: AnvilInstance;
/** How many blocks behind its head the node's finalized block is. */
let finalityLag: bigint;

function devKey(index: number): Hex {
  const key = anvilDevPrivateKeys[index];
  if (!key) throw new Error(`no dev key ${index}`);
  return key;
}
const railFor = (keyIndex: number, rpcUrl = anvil.rpcUrl): EvmRail =>
  createEvmRail({ rpcUrl, chainId, privateKey: devKey(keyIndex), requestTimeoutMs: 3_000 });
const reader = () => createPublicClient({ transport: http(anvil.rpcUrl, { retryCount: 0 }), cacheTime: 0 });
const mine = (blocks: bigint) => rpc(anvil.rpcUrl, 'anvil_mine', [`0x${blocks.toString(16)}`]);
const head = () => reader().getBlockNumber({ cacheTime: 0 });
const finalized = async () => (await reader().getBlock({ blockTag: 'finalized' })).number;

/** Mines until the node's finalized block is `finalizedTarget` (the lag exceeds the depth). */
async function mineUntil(finalizedTarget: bigint): Promise<void> {
  const target = finalizedTarget + finalityLag;
  const now = await head();
  if (target > now) await mine(target - now);
  expect(await finalized()).toBe(finalizedTarget);
}

/** Signed with the rail's next nonce and never sent: the bytes a stuck withdrawal stores. */
async function signedNeverSent(rail: EvmRail, request?: Partial<EvmSignRequestInput>) {
  const nonce = (await rail.readNonces()).pending;
  const input: EvmSignRequestInput = {
    transfer: { asset: 'native', to: nativeTransfer.to, amountMinor: nativeTransfer.amountMinor.toString() },
    nonce,
    ...fees,
    ...request,
  };
  const signed = await rail.sign(input, approvalFor(input.transfer));
  return { ...signed, nonce };
}

/** Someone else holding the key (a manual sweep, say) takes `nonce`; returns its hash and block. */
async function takeNonce(keyIndex: number, nonce: number): Promise<{ hash: Hex; block: bigint }> {
  const account = privateKeyToAccount(devKey(keyIndex));
  const wallet = createWalletClient({ account, transport: http(anvil.rpcUrl, { retryCount: 0 }) });
  const hash = await wallet.sendTransaction({ chain: null, to: account.address, value: 1n, nonce });
  const receipt = await reader().waitForTransactionReceipt({ hash });
  return { hash, block: receipt.blockNumber };
}

/** Can nothing of ours still pay? Asked at depth 3, about `nativeTransfer`. */
const notSentRequest = (
  rail: EvmRail,
  ours: { txHash: Hex; nonce: number } | null,
): EvmSettlementRequest => ({
  sender: rail.address,
  ours,
  namedTxHash: null,
  terms: nativeTransfer,
  depth,
  intent: 'not_sent',
});

beforeAll(async () => {
  anvil = await startAnvil({ chainId });
  // Past the lag, so the node's finalized block moves with its head from the first test on.
  await mine(100n);
  finalityLag = (await head()) - (await finalized());
  expect(finalityLag).toBeGreaterThan(BigInt(depth));
});
afterAll(async () => {
  await anvil?.stop();
});

describe('I32-FINAL not sent is proven only once the transaction that took the nonce is final', () => {
  it('I32-FINAL a nonce consumed by another transaction at depth but above the finalized block is unproven (not_final); once final it is NOT_SENT', async () => {
    const rail = railFor(2);
    const ours = await signedNeverSent(rail);
    const other = await takeNonce(2, ours.nonce);
    const request = notSentRequest(rail, { txHash: ours.txHash, nonce: ours.nonce });

    // At the asset's depth, and the node's finalized block one short of the taker's block.
    await mineUntil(other.block - 1n);
    expect((await head()) - other.block + 1n).toBeGreaterThanOrEqual(BigInt(depth));
    const early = await rail.settlement(request);
    expect(early).toMatchObject({
      verdict: 'unproven',
      reason: 'not_final',
      finalizedBlockNumber: other.block - 1n,
      consumer: { txHash: other.hash, blockNumber: other.block },
    });
    // Asked as "paid" instead, the fallback to "never able to pay" waits for finality too.
    const asPaid = await rail.settlement({ ...request, intent: 'paid' });
    expect(asPaid.verdict).toBe('unproven');

    await mineUntil(other.block);
    const proven = await rail.settlement(request);
    expect(proven).toMatchObject({
      verdict: 'not_sent',
      reason: 'nonce_consumed_by_other',
      finalizedBlockNumber: other.block,
      consumer: { txHash: other.hash, blockNumber: other.block },
    });
    expect((await rail.settlement({ ...request, intent: 'paid' })).verdict).toBe('not_sent');
  });

  it('I32-FINAL our own transaction reverted at depth is unproven until its block is final: a reorganisation could mine our bytes, or a fee bump of them, successfully instead', async () => {
    const rail = railFor(3);
    const to = freshAddress();
    const token = await deployTestToken({
      rpcUrl: anvil.rpcUrl,
      chainId,
      privateKey: devKey(3),
      decimals: 6,
      supplyMinor: 1_000n,
    });
    // Beyond the balance: mined, reverted, its nonce consumed by our own transaction.
    const ours = await signedNeverSent(rail, {
      transfer: { asset: 'erc20', token, to, amountMinor: '5000' },
      gasLimit: 100_000n,
    });
    expect((await rail.broadcast(ours.rawTransaction)).outcome).toBe('accepted');
    const receipt = await reader().waitForTransactionReceipt({ hash: ours.txHash });
    expect(receipt.status).toBe('reverted');
    const request: EvmSettlementRequest = {
      sender: rail.address,
      ours: { txHash: ours.txHash, nonce: ours.nonce },
      namedTxHash: null,
      terms: { asset: 'erc20', token, to, amountMinor: 5000n },
      depth,
      intent: 'not_sent',
    };

    await mineUntil(receipt.blockNumber - 1n);
    expect(await rail.settlement(request)).toMatchObject({
      verdict: 'unproven',
      reason: 'not_final',
      finalizedBlockNumber: receipt.blockNumber - 1n,
    });

    await mineUntil(receipt.blockNumber);
    expect(await rail.settlement(request)).toMatchObject({
      verdict: 'not_sent',
      reason: 'reverted_at_depth',
      blockNumber: receipt.blockNumber,
    });
  });

  it('I32-FINAL nothing signed is NOT_SENT without asking for finality; a node that cannot say which block is finalized proves no taken nonce', async () => {
    const proxy = await startFaultProxy(anvil.rpcUrl);
    try {
      // The node behind the proxy will not say which block is finalized.
      const refused = proxy.addRule({
        methods: ['eth_getBlockByNumber'],
        mode: '429',
        when: (params) => params[0] === 'finalized',
      });
      const rail = railFor(4, proxy.url);

      const never = await rail.settlement(notSentRequest(rail, null));
      expect(never).toMatchObject({ verdict: 'not_sent', reason: 'never_signed' });
      expect(refused.hits).toBe(0);

      const ours = await signedNeverSent(railFor(4));
      const other = await takeNonce(4, ours.nonce);
      // Final by the node's own account (read directly, not through the proxy).
      await mineUntil(other.block);
      const unknown = await rail.settlement(notSentRequest(rail, { txHash: ours.txHash, nonce: ours.nonce }));
      expect(unknown).toMatchObject({
        verdict: 'unproven',
        reason: 'finalized_block_unknown',
        finalizedBlockNumber: null,
      });
      expect(refused.hits).toBeGreaterThan(0);
    } finally {
      await proxy.close();
    }
  });

  it('I32-FINAL PAID by a named transaction that took our nonce waits for that transaction to be final: a deeper reorganisation could drop it and mine our stored bytes, paying twice', async () => {
    const rail = railFor(6);
    const ours = await signedNeverSent(rail);
    // The key holder pays the customer by hand with our nonce: the same terms, other bytes.
    const account = privateKeyToAccount(devKey(6));
    const wallet = createWalletClient({ account, transport: http(anvil.rpcUrl, { retryCount: 0 }) });
    const named = await wallet.sendTransaction({
      chain: null,
      to: nativeTransfer.to,
      value: nativeTransfer.amountMinor,
      nonce: ours.nonce,
    });
    const { blockNumber } = await reader().waitForTransactionReceipt({ hash: named });
    const request: EvmSettlementRequest = {
      ...notSentRequest(rail, { txHash: ours.txHash, nonce: ours.nonce }),
      namedTxHash: named,
      intent: 'paid',
    };

    await mineUntil(blockNumber - 1n);
    expect(await rail.settlement(request)).toMatchObject({
      verdict: 'unproven',
      reason: 'not_final',
      txHash: named,
      finalizedBlockNumber: blockNumber - 1n,
    });

    await mineUntil(blockNumber);
    expect(await rail.settlement(request)).toMatchObject({
      verdict: 'paid',
      reason: 'named_transaction_mined',
      txHash: named,
    });
  });

  it('I32-FINAL PAID stays at the confirmation depth: our payment mined at depth is paid before it is final', async () => {
    const rail = railFor(5);
    const ours = await signedNeverSent(rail);
    expect((await rail.broadcast(ours.rawTransaction)).outcome).toBe('accepted');
    const receipt = await reader().waitForTransactionReceipt({ hash: ours.txHash });
    await mine(BigInt(depth - 1));
    expect(await finalized()).toBeLessThan(receipt.blockNumber);
    const paid = await rail.settlement({
      ...notSentRequest(rail, { txHash: ours.txHash, nonce: ours.nonce }),
      intent: 'paid',
    });
    expect(paid).toMatchObject({ verdict: 'paid', reason: 'our_transaction_mined', txHash: ours.txHash });
  });
});
