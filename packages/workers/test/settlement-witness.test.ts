/**
 * The witness a person's resolution of a stuck withdrawal needs (I11-F4), on a real anvil
 * chain and the real custodian simulator: it proves a withdrawal paid or never able to pay, at the
 * asset's confirmation depth (a taken nonce only once the node calls its block finalized,
 * I32-FINAL), or answers UNPROVEN.
 */
import { anvilDevPrivateKeys, createCustodianAdapter, generateWebhookSecret } from '@idem/rails';
import { mineUntilFinal, startFaultProxy } from '@idem/testing/chain';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import { createWalletClient, getAddress, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RailRegistry } from '../src/rails.ts';
import { attestSettlement } from '../src/settlement-witness.ts';
import { CHAIN_ID, type Environment, ETH, startEnvironment } from './environment.ts';

const BTC_DESTINATION = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
/** Nothing listens here: every call fails at once. */
const CLOSED_PORT_URL = 'http://127.0.0.1:9';

let env: Environment;
let simulator: SimulatorProcess;
let rails: RailRegistry;

beforeAll(async () => {
  env = await startEnvironment();
  simulator = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
  // Deeper than every asset's depth, so a pinned block exists from the first test.
  await env.mine(3);
  rails = new RailRegistry({
    evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000 },
    custodian: createCustodianAdapter({ baseUrl: simulator.url, timeoutMs: 1_000 }),
  });
});
afterAll(async () => {
  await simulator?.stop();
  await env?.close();
});

const attest = (
  op: Parameters<typeof attestSettlement>[1],
  assertion: Parameters<typeof attestSettlement>[2],
  using = rails,
) => attestSettlement({ db: env.t.db, rails: using }, op, assertion);

/** Mines until the node calls the block of `txHash` finalized. */
async function mineUntilFinalized(txHash: Hex): Promise<void> {
  const { blockNumber } = await env.chain.getTransactionReceipt({ hash: txHash });
  await mineUntilFinal(env.anvil.rpcUrl, blockNumber);
}

/** Someone else holding the hot wallet's key (a manual sweep, say) sends a transaction. */
async function sendFromHotWallet(request: { to: string; value: bigint; nonce?: number }): Promise<Hex> {
  const wallet = createWalletClient({
    account: privateKeyToAccount(anvilDevPrivateKeys[1] as Hex),
    transport: http(env.anvil.rpcUrl),
  });
  const hash = await wallet.sendTransaction({
    chain: null,
    to: request.to as Hex,
    value: request.value,
    ...(request.nonce === undefined ? {} : { nonce: request.nonce }),
  });
  await env.chain.waitForTransactionReceipt({ hash });
  return hash;
}

/** A withdrawal signed with the hot wallet's next nonce whose broadcast never reached a node: UNKNOWN. */
async function signedNeverSent(amountWei: bigint) {
  const op = await env.withdraw(amountWei);
  // The node's chain id (I32-CHAIN) and fees (I12-FEES) are read before signing; nothing else reaches it, the send included.
  const proxy = await startFaultProxy(env.anvil.rpcUrl);
  proxy.fault = 'reset-without-forward';
  proxy.spareMethods = ['eth_chainId', 'eth_feeHistory'];
  const cut = env.worker({
    rails: { evm: { rpcUrl: proxy.url, chainId: CHAIN_ID, requestTimeoutMs: 500 } },
  });
  try {
    for (let i = 0; i < 3 && (await env.operation(op.operationId)).state !== 'UNKNOWN'; i++)
      await cut.runOnce();
  } finally {
    await proxy.close();
  }
  const unknown = await env.operation(op.operationId);
  expect(unknown.state).toBe('UNKNOWN');
  expect(unknown.signedArtifact).toMatch(/^0x/);
  expect(unknown.chainNonce).not.toBeNull();
  return unknown;
}

describe('I11-F4 the chain witness, at the asset confirmation depth', () => {
  it('I11-F4 I32-FINAL NOT_SENT is refused while the nonce is unconsumed, and while the transaction that took it is at depth but not final; proven once it is final, and the stored bytes can then never be mined', async () => {
    const op = await signedNeverSent(ETH / 10n);
    const assertion = { toState: 'VERIFIED_NOT_SENT' as const };

    const unconsumed = await attest(op, assertion);
    expect(unconsumed).toMatchObject({ verdict: 'UNPROVEN', source: 'chain' });
    expect(unconsumed.detail).toMatchObject({
      reason: 'nonce_not_consumed_at_depth',
      ourNonce: op.chainNonce,
    });

    // Another transaction takes the nonce; it is in the head block, one short of depth 2.
    const taker = await sendFromHotWallet({ to: env.hotWallet, value: 1n, nonce: op.chainNonce ?? -1 });
    const shallow = await attest(op, assertion);
    expect(shallow.verdict).toBe('UNPROVEN');
    expect(shallow.detail).toMatchObject({ reason: 'nonce_not_consumed_at_depth', depthRequired: 2 });

    // At depth, but a reorganisation deeper than that could still swap the taker for our bytes.
    await env.mine(1);
    const notFinal = await attest(op, assertion);
    expect(notFinal.verdict).toBe('UNPROVEN');
    expect(notFinal.detail).toMatchObject({ reason: 'not_final', consumer: { txHash: taker } });

    await mineUntilFinalized(taker);
    const proven = await attest(op, assertion);
    expect(proven).toMatchObject({ verdict: 'NOT_SENT', source: 'chain', txHash: null });
    expect(proven.detail).toMatchObject({
      reason: 'nonce_consumed_by_other',
      operationId: op.operationId,
      minedNonceAtPin: (op.chainNonce ?? 0) + 1,
    });

    // The stored bytes are dead: the node refuses them, and nothing reached the destination.
    const outcome = await rails.evmReader().broadcast(op.signedArtifact as Hex);
    expect(outcome).toMatchObject({ outcome: 'rejected', reason: 'nonce_too_low' });
    expect(await env.balanceOf(op.destination ?? '')).toBe(0n);
  });

  it('I11-F4 PAID for a really mined transaction with the approved terms, at depth', async () => {
    const op = await env.withdraw(ETH / 20n);
    const worker = env.worker();
    await worker.runOnce();
    const broadcast = await env.operation(op.operationId);
    expect(broadcast.state).toBe('BROADCAST');
    await env.chain.waitForTransactionReceipt({ hash: broadcast.txHash as Hex });

    const shallow = await attest(broadcast, { toState: 'CONFIRMED' });
    expect(shallow.verdict).toBe('UNPROVEN');
    expect(shallow.detail).toMatchObject({ reason: 'not_deep_enough' });

    await env.mine(1);
    const paid = await attest(broadcast, { toState: 'CONFIRMED' });
    expect(paid).toMatchObject({ verdict: 'PAID', source: 'chain', txHash: broadcast.txHash });
    expect(paid.detail).toMatchObject({ reason: 'our_transaction_mined' });
    // I12-FEES: the gas it paid, for the confirmation's network-fee entry.
    const receipt = await env.chain.getTransactionReceipt({ hash: broadcast.txHash as Hex });
    expect(paid.detail).toMatchObject({
      networkFeeAsset: 'ETH',
      networkFeeMinor: (receipt.gasUsed * receipt.effectiveGasPrice).toString(),
    });
    // Not NOT_SENT either: our transaction paid.
    const notSent = await attest(broadcast, { toState: 'VERIFIED_NOT_SENT' });
    expect(notSent.verdict).toBe('PAID');
  });

  it('I11-F4 a named transaction with another amount or destination is UNPROVEN', async () => {
    const first = await signedNeverSent(ETH / 50n);
    const second = await signedNeverSent(ETH / 50n);
    // Each takes one of the two nonces, so the stored bytes are dead and only the terms differ.
    const wrongAmount = await sendFromHotWallet({
      to: first.destination ?? '',
      value: ETH / 51n,
      nonce: first.chainNonce ?? -1,
    });
    const wrongDestination = await sendFromHotWallet({
      to: getAddress(`0x${'12'.repeat(20)}`),
      value: ETH / 50n,
      nonce: second.chainNonce ?? -1,
    });
    await mineUntilFinalized(wrongDestination);
    // Not PAID: the chain shows instead that nothing of ours can pay (another transaction took
    // our nonce, and is final), and says why the named one did not prove the payment.
    const byAmount = await attest(first, { toState: 'CONFIRMED', txHash: wrongAmount });
    expect(byAmount.verdict).toBe('NOT_SENT');
    expect(byAmount.detail).toMatchObject({ claimCheck: 'amount_differs' });
    const byDestination = await attest(first, { toState: 'CONFIRMED', txHash: wrongDestination });
    expect(byDestination.verdict).toBe('NOT_SENT');
    expect(byDestination.detail).toMatchObject({ claimCheck: 'destination_differs' });
    const ours = await attest(first, { toState: 'CONFIRMED' });
    expect(ours.verdict).toBe('NOT_SENT');
    expect(ours.detail).toMatchObject({ claimCheck: 'not_mined' });
  });

  it('I11-F4 an unreachable node gives UNPROVEN, never a verdict, and no error text', async () => {
    const op = await signedNeverSent(ETH / 60n);
    await mineUntilFinalized(
      await sendFromHotWallet({ to: env.hotWallet, value: 1n, nonce: op.chainNonce ?? -1 }),
    );
    const down = new RailRegistry({
      evm: { rpcUrl: CLOSED_PORT_URL, chainId: CHAIN_ID, requestTimeoutMs: 500 },
    });
    for (const toState of ['VERIFIED_NOT_SENT', 'CONFIRMED'] as const) {
      const answer = await attest(op, { toState }, down);
      expect(answer).toMatchObject({ verdict: 'UNPROVEN', source: 'chain', txHash: null });
      expect(answer.detail).toMatchObject({ reason: 'rail_unreachable' });
      expect(JSON.stringify(answer)).not.toContain('127.0.0.1');
    }
    // The same question to the working node is proven: the failure above was the node's, not the case's.
    expect((await attest(op, { toState: 'VERIFIED_NOT_SENT' })).verdict).toBe('NOT_SENT');
  });
});

describe('I11-F4 the custodian witness, by our reference', () => {
  it('I11-F4 no record for our reference is NOT_SENT; a completed transfer with our terms is PAID', async () => {
    const never = await env.withdraw(40_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    const none = await attest(never, { toState: 'VERIFIED_NOT_SENT' });
    expect(none).toMatchObject({ verdict: 'NOT_SENT', source: 'custodian' });
    expect(none.detail).toMatchObject({ reason: 'no_record_for_reference' });

    await simulator.control({ settlement: { outcome: 'complete', afterMs: 50 } });
    const sent = await env.withdraw(45_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    const adapter = createCustodianAdapter({ baseUrl: simulator.url });
    const submitted = await adapter.submit({
      externalReference: sent.operationId,
      asset: 'BTC',
      amountMinor: '45000',
      destination: BTC_DESTINATION,
    });
    expect(submitted.outcome).toBe('acknowledged');
    const pending = await attest(sent, { toState: 'CONFIRMED' });
    expect(['UNPROVEN', 'PAID']).toContain(pending.verdict);
    // Five seconds of pauses between attestations before: ten of wall time covers them and the calls.
    const paid =
      pending.verdict === 'PAID'
        ? pending
        : await vi.waitFor(
            async () => {
              const attested = await attest(sent, { toState: 'CONFIRMED' });
              if (attested.verdict !== 'PAID') throw new Error(`still ${attested.verdict}`);
              return attested;
            },
            { timeout: 10_000, interval: 100 },
          );
    expect(paid).toMatchObject({ verdict: 'PAID', source: 'custodian' });
    expect(paid.detail).toMatchObject({ reason: 'completed', status: 'completed' });
    // Completed is not "no record": releasing the hold is refused.
    expect((await attest(sent, { toState: 'VERIFIED_NOT_SENT' })).verdict).toBe('PAID');

    const down = new RailRegistry({
      custodian: createCustodianAdapter({ baseUrl: CLOSED_PORT_URL, timeoutMs: 500 }),
    });
    expect((await attest(never, { toState: 'VERIFIED_NOT_SENT' }, down)).verdict).toBe('UNPROVEN');
  });
});
