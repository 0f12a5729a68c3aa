/**
 * The EVM rail against a real anvil node. Each test uses its own funded sender so their nonces
 * never interfere, and fresh random recipients so balances prove exactly how many transfers landed.
 */
import { isIdemError } from '@idem/contracts';
import { balanceOf, type FaultProxy, rpc, startFaultProxy } from '@idem/testing/chain';
import { approvalFor } from '@idem/testing/signer';
import { type Address, createPublicClient, erc20Abi, type Hex, http } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type AnvilInstance, anvilDevPrivateKeys, startAnvil } from '../src/evm/anvil.ts';
import { createEvmRail, type EvmRail } from '../src/evm/rail.ts';
import { deployTestToken } from '../src/evm/test-token.ts';
import type { EvmSignRequestInput } from '../src/evm/types.ts';

const chainId = 31337;
const fees = { gasLimit: 21_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };
const freshAddress = (): Address => privateKeyToAccount(generatePrivateKey()).address;

/** Signs with an approval that covers exactly this transfer (the signer checks it, C02). */
const signApproved = (rail: EvmRail, request: EvmSignRequestInput) =>
  rail.sign(request, approvalFor(request.transfer));

function devKey(index: number): Hex {
  const key = anvilDevPrivateKeys[index];
  if (!key) throw new Error(`no dev key ${index}`);
  return key;
}

/**
 * The rail's lookup once the auto-mined block is visible: under load anvil answers a send before
 * its block is, so a lookup right after it may still say pending.
 */
async function lookupOnceMined(rail: EvmRail, request: Parameters<EvmRail['lookup']>[0]) {
  // Five seconds of pauses between lookups before: ten of wall time covers them and the lookups.
  return vi.waitFor(
    async () => {
      const evidence = await rail.lookup(request);
      if (evidence.found === 'pending') throw new Error(`${request.txHash} still pending`);
      return evidence;
    },
    { timeout: 10_000, interval: 50 },
  );
}

describe('EVM rail on an auto-mining anvil', () => {
  let anvil: AnvilInstance;
  const railFor = (keyIndex: number): EvmRail =>
    createEvmRail({ rpcUrl: anvil.rpcUrl, chainId, privateKey: devKey(keyIndex), requestTimeoutMs: 3_000 });

  beforeAll(async () => {
    anvil = await startAnvil({ chainId });
  });
  afterAll(async () => {
    await anvil?.stop();
  });

  it('signs a native transfer, broadcasts it, and reports it mined with growing confirmations', async () => {
    const rail = railFor(0);
    await rail.verifyChain();
    const to = freshAddress();
    const { pending: nonce } = await rail.readNonces();
    const signed = await signApproved(rail, {
      transfer: { asset: 'native', to, amountMinor: '1234567' },
      nonce,
      ...fees,
    });
    expect(signed.sender).toBe(rail.address);

    // Signing is deterministic: the same request gives the same bytes, so a stored signature is the only one.
    const again = await signApproved(rail, {
      transfer: { asset: 'native', to, amountMinor: 1234567n },
      nonce,
      ...fees,
    });
    expect(again.rawTransaction).toBe(signed.rawTransaction);

    const outcome = await rail.broadcast(signed.rawTransaction);
    expect(outcome).toEqual({ outcome: 'accepted', txHash: signed.txHash, alreadyKnown: false });

    const mined = await lookupOnceMined(rail, { txHash: signed.txHash, sender: signed.sender, nonce });
    expect(mined).toMatchObject({ found: 'mined', confirmations: 1, status: 'success' });

    await rpc(anvil.rpcUrl, 'anvil_mine', ['0x4']);
    const deeper = await rail.lookup({ txHash: signed.txHash, sender: signed.sender, nonce });
    expect(deeper).toMatchObject({ found: 'mined', confirmations: 5 });
    expect(await balanceOf(anvil.rpcUrl, to)).toBe(1234567n);
    expect(await rail.readNonces()).toEqual({ latest: nonce + 1, pending: nonce + 1 });
  });

  it('refuses to sign outside its caps or with malformed input (VALIDATION), before any network call', async () => {
    const rail = railFor(0);
    const to = freshAddress();
    const attempts = [
      {
        transfer: { asset: 'native' as const, to, amountMinor: '1' },
        nonce: 0,
        ...fees,
        gasLimit: 10_000_000n,
      },
      {
        transfer: { asset: 'native' as const, to, amountMinor: '1' },
        nonce: 0,
        ...fees,
        maxFeePerGas: 10n ** 16n,
      },
      {
        transfer: { asset: 'native' as const, to, amountMinor: '1' },
        nonce: 0,
        ...fees,
        maxPriorityFeePerGas: 10n ** 11n,
      },
      { transfer: { asset: 'native' as const, to, amountMinor: '1.5' }, nonce: 0, ...fees },
      { transfer: { asset: 'native' as const, to, amountMinor: '0' }, nonce: 0, ...fees },
      { transfer: { asset: 'native' as const, to: '0xnot-an-address', amountMinor: '1' }, nonce: 0, ...fees },
      { transfer: { asset: 'native' as const, to, amountMinor: '1' }, nonce: -1, ...fees },
    ];
    for (const attempt of attempts) {
      await expect(signApproved(rail, attempt)).rejects.toSatisfy((error) =>
        isIdemError(error, 'VALIDATION'),
      );
    }
  });

  it('C14 a nonce taken by another mined transaction is reported absent with nonceConsumed, and its bytes are rejected', async () => {
    const rail = railFor(3);
    const { pending: nonce } = await rail.readNonces();
    const ours = await signApproved(rail, {
      transfer: { asset: 'native', to: freshAddress(), amountMinor: '100' },
      nonce,
      ...fees,
    });

    // Before anything takes the nonce, absence proves nothing.
    expect(await rail.lookup({ txHash: ours.txHash, sender: ours.sender, nonce })).toMatchObject({
      found: 'absent',
      nonceConsumed: false,
    });

    const other = await signApproved(rail, {
      transfer: { asset: 'native', to: freshAddress(), amountMinor: '200' },
      nonce,
      ...fees,
    });
    expect((await rail.broadcast(other.rawTransaction)).outcome).toBe('accepted');

    const evidence = await rail.lookup({ txHash: ours.txHash, sender: ours.sender, nonce });
    expect(evidence).toMatchObject({ found: 'absent', nonceConsumed: true, minedNonce: nonce + 1 });

    // Our bytes can never be mined now: the node refuses them cleanly rather than ambiguously.
    expect(await rail.broadcast(ours.rawTransaction)).toMatchObject({
      outcome: 'rejected',
      reason: 'nonce_too_low',
    });
    // The transaction that took the nonce is ours to recognise too: a rebroadcast of it is accepted.
    expect(await rail.broadcast(other.rawTransaction)).toMatchObject({
      outcome: 'accepted',
      alreadyKnown: true,
    });
  });

  it('rejects cleanly when the sender cannot pay, and nothing reaches the chain', async () => {
    const broke = createEvmRail({ rpcUrl: anvil.rpcUrl, chainId, privateKey: generatePrivateKey() });
    const signed = await signApproved(broke, {
      transfer: { asset: 'native', to: freshAddress(), amountMinor: '1' },
      nonce: 0,
      ...fees,
    });
    expect(await broke.broadcast(signed.rawTransaction)).toMatchObject({
      outcome: 'rejected',
      reason: 'insufficient_funds',
    });
    expect(await broke.lookup({ txHash: signed.txHash, sender: signed.sender, nonce: 0 })).toMatchObject({
      found: 'absent',
      nonceConsumed: false,
    });
  });

  describe('answers lost after the node took the transaction (a real proxy in front of anvil)', () => {
    let proxy: FaultProxy;
    beforeAll(async () => {
      proxy = await startFaultProxy(anvil.rpcUrl);
    });
    afterAll(async () => {
      await proxy?.close();
    });

    for (const [fault, reason] of [
      ['forward-then-hang', 'timeout'],
      ['forward-then-502', 'http_status'],
      ['forward-then-reset', 'connection'],
    ] as const) {
      it(`C13 ${fault}: ambiguous (${reason}), never success or failure; lookup finds it; the stored bytes resent make exactly one transfer`, async () => {
        const direct = railFor(4);
        const throughProxy = createEvmRail({
          rpcUrl: proxy.url,
          chainId,
          privateKey: devKey(4),
          requestTimeoutMs: 1_000,
        });
        const to = freshAddress();
        const { pending: nonce } = await direct.readNonces();
        const signed = await signApproved(direct, {
          transfer: { asset: 'native', to, amountMinor: '777' },
          nonce,
          ...fees,
        });

        proxy.fault = fault;
        const forwardedBefore = proxy.forwarded;
        const outcome = await throughProxy.broadcast(signed.rawTransaction);
        proxy.fault = 'none';
        expect(proxy.forwarded).toBe(forwardedBefore + 1);
        expect(outcome).toMatchObject({ outcome: 'ambiguous', reason, txHash: signed.txHash });

        // Reconcile before any resend (C14): the chain says the transaction exists.
        const evidence = await lookupOnceMined(direct, {
          txHash: signed.txHash,
          sender: signed.sender,
          nonce,
        });
        expect(evidence).toMatchObject({ found: 'mined', status: 'success' });

        // Resending the stored bytes is harmless: the node recognises them.
        expect(await direct.broadcast(signed.rawTransaction)).toMatchObject({
          outcome: 'accepted',
          alreadyKnown: true,
        });
        expect(await balanceOf(anvil.rpcUrl, to)).toBe(777n);
        expect((await direct.readNonces()).latest).toBe(nonce + 1);
      });
    }
  });

  it('deploys the test ERC-20, signs a token transfer, and the deposit scan finds token and native deposits once', async () => {
    const treasury = railFor(0);
    const customer = railFor(1);
    const token = await deployTestToken({
      rpcUrl: anvil.rpcUrl,
      chainId,
      privateKey: devKey(1),
      decimals: 6,
      supplyMinor: 1_000_000_000n,
    });
    const depositAddress = freshAddress();
    const fromBlock = (await createReader(anvil.rpcUrl).getBlockNumber()) + 1n;

    const tokenNonce = (await customer.readNonces()).pending;
    const tokenTransfer = await signApproved(customer, {
      transfer: { asset: 'erc20', token, to: depositAddress, amountMinor: '2500000' },
      nonce: tokenNonce,
      ...fees,
      gasLimit: 100_000n,
    });
    expect((await customer.broadcast(tokenTransfer.rawTransaction)).outcome).toBe('accepted');

    const nativeNonce = (await treasury.readNonces()).pending;
    const nativeTransfer = await signApproved(treasury, {
      transfer: { asset: 'native', to: depositAddress, amountMinor: '42' },
      nonce: nativeNonce,
      ...fees,
    });
    expect((await treasury.broadcast(nativeTransfer.rawTransaction)).outcome).toBe('accepted');

    // A token transfer beyond the balance is mined but reverts: it moves nothing and is no deposit.
    const overdraft = await signApproved(customer, {
      transfer: { asset: 'erc20', token, to: depositAddress, amountMinor: '10000000000' },
      nonce: tokenNonce + 1,
      ...fees,
      gasLimit: 100_000n,
    });
    expect((await customer.broadcast(overdraft.rawTransaction)).outcome).toBe('accepted');
    const overdraftFound = await lookupOnceMined(customer, {
      txHash: overdraft.txHash,
      sender: customer.address,
      nonce: tokenNonce + 1,
    });
    expect(overdraftFound).toMatchObject({ found: 'mined', status: 'reverted' });

    await rpc(anvil.rpcUrl, 'anvil_mine', ['0x2']);
    const deposits = await treasury.scanDeposits({ fromBlock, watched: [depositAddress], tokens: [token] });
    expect(deposits).toHaveLength(2);
    const [tokenDeposit, nativeDeposit] = deposits;
    expect(tokenDeposit).toMatchObject({
      asset: 'erc20',
      token,
      from: customer.address,
      to: depositAddress,
      amountMinor: 2_500_000n,
      txHash: tokenTransfer.txHash,
      confirmations: 5,
    });
    expect(nativeDeposit).toMatchObject({
      depositId: `${nativeTransfer.txHash}:native`,
      asset: 'native',
      token: null,
      amountMinor: 42n,
      confirmations: 4,
    });
    const tokenBalance = await createReader(anvil.rpcUrl).readContract({
      address: token,
      abi: erc20Abi,
      functionName: 'balanceOf',
      args: [depositAddress],
    });
    expect(tokenBalance).toBe(2_500_000n);

    // A scan wider than the cap is refused rather than left to run unbounded.
    await expect(
      treasury.scanDeposits({ fromBlock: 0n, toBlock: 5_000n, watched: [depositAddress] }),
    ).rejects.toThrow(/at most/);
  });
});

describe('EVM rail on a manually mined anvil (transactions wait in the pool)', () => {
  let anvil: AnvilInstance;
  let rail: EvmRail;
  beforeAll(async () => {
    anvil = await startAnvil({ chainId, mining: 'manual' });
    rail = createEvmRail({ rpcUrl: anvil.rpcUrl, chainId, privateKey: devKey(1), requestTimeoutMs: 3_000 });
  });
  afterAll(async () => {
    await anvil?.stop();
  });

  it('C12 a transaction dropped from the pool is resent from the same stored bytes: same hash, exactly one transfer', async () => {
    const to = freshAddress();
    const { pending: nonce } = await rail.readNonces();
    // The stored artifact (what recordSigned persists): the only bytes ever sent for this operation.
    const stored = await signApproved(rail, {
      transfer: { asset: 'native', to, amountMinor: '5000' },
      nonce,
      ...fees,
    });

    expect(await rail.broadcast(stored.rawTransaction)).toMatchObject({
      outcome: 'accepted',
      alreadyKnown: false,
    });
    expect(await rail.lookup({ txHash: stored.txHash, sender: stored.sender, nonce })).toMatchObject({
      found: 'pending',
    });
    // A rebroadcast while it sits in the pool is recognised, not an error.
    expect(await rail.broadcast(stored.rawTransaction)).toMatchObject({
      outcome: 'accepted',
      alreadyKnown: true,
    });

    // The node forgets it (pool eviction). Absence with an unconsumed nonce is not evidence of not-sent.
    await rpc(anvil.rpcUrl, 'anvil_dropTransaction', [stored.txHash]);
    expect(await rail.lookup({ txHash: stored.txHash, sender: stored.sender, nonce })).toMatchObject({
      found: 'absent',
      nonceConsumed: false,
    });

    const resent = await rail.broadcast(stored.rawTransaction);
    expect(resent).toMatchObject({ outcome: 'accepted', txHash: stored.txHash });
    await rpc(anvil.rpcUrl, 'evm_mine');
    expect(await rail.lookup({ txHash: stored.txHash, sender: stored.sender, nonce })).toMatchObject({
      found: 'mined',
      confirmations: 1,
    });

    // Once mined, the node answers "nonce too low"; the rail sees our own hash mined and calls it accepted.
    expect(await rail.broadcast(stored.rawTransaction)).toMatchObject({
      outcome: 'accepted',
      alreadyKnown: true,
    });
    await rpc(anvil.rpcUrl, 'evm_mine');
    expect(await balanceOf(anvil.rpcUrl, to)).toBe(5000n);
    expect((await rail.readNonces()).latest).toBe(nonce + 1);
  });

  it('C17 a reorganisation removes a mined transaction: lookup stops reporting it mined; the stored bytes mine again', async () => {
    const to = freshAddress();
    const { pending: nonce } = await rail.readNonces();
    const stored = await signApproved(rail, {
      transfer: { asset: 'native', to, amountMinor: '9000' },
      nonce,
      ...fees,
    });
    expect((await rail.broadcast(stored.rawTransaction)).outcome).toBe('accepted');
    await rpc(anvil.rpcUrl, 'anvil_mine', ['0x3']);
    const before = await rail.lookup({ txHash: stored.txHash, sender: stored.sender, nonce });
    expect(before).toMatchObject({ found: 'mined', confirmations: 3 });
    if (before.found !== 'mined') throw new Error('unreachable');

    // Replace the last 3 blocks with 3 empty ones: same height, different blocks, our transaction gone.
    await rpc(anvil.rpcUrl, 'anvil_reorg', [3, []]);
    const reorgedBlock = await rpc<{ hash: string }>(anvil.rpcUrl, 'eth_getBlockByNumber', [
      `0x${before.blockNumber.toString(16)}`,
      false,
    ]);
    expect(reorgedBlock.hash).not.toBe(before.blockHash);

    const after = await rail.lookup({ txHash: stored.txHash, sender: stored.sender, nonce });
    expect(after).toMatchObject({ found: 'absent', nonceConsumed: false });
    expect(await balanceOf(anvil.rpcUrl, to)).toBe(0n);

    // The same bytes are still valid on the new chain: resending them restores exactly one transfer.
    expect(await rail.broadcast(stored.rawTransaction)).toMatchObject({
      outcome: 'accepted',
      txHash: stored.txHash,
    });
    await rpc(anvil.rpcUrl, 'evm_mine');
    expect(await rail.lookup({ txHash: stored.txHash, sender: stored.sender, nonce })).toMatchObject({
      found: 'mined',
    });
    expect(await balanceOf(anvil.rpcUrl, to)).toBe(9000n);
  });
});

function createReader(rpcUrl: string) {
  return createPublicClient({ transport: http(rpcUrl, { retryCount: 0 }), cacheTime: 0 });
}
