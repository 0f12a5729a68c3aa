/**
 * Evidence from the node: a node behind a load balancer answers 429, hangs, or lags
 * the others. None of that is evidence: the deposit watcher and the reconciler change no money
 * state on it. Only positive answers act, and only when seen twice: a different canonical block
 * at a deposit's height (reversal), a nonce consumed at depth by a transaction that is not ours
 * (VERIFIED_NOT_SENT). Real anvil behind the fault proxy of @idem/testing/chain, real database.
 */
import { getBalances, rowsOf, withTenant } from '@idem/core';
import { anvilDevPrivateKeys } from '@idem/rails';
import { type FaultProxy, startFaultProxy } from '@idem/testing/chain';
import { sql } from 'drizzle-orm';
import { createWalletClient, getAddress, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, ETH, rpc, startEnvironment } from './environment.ts';

let env: Environment;
let proxy: FaultProxy;
const depositAddress = getAddress('0x1000000000000000000000000000000000000a12');
const ACCOUNT = 'acct-node';

beforeAll(async () => {
  env = await startEnvironment({
    rpcUrl: async (anvilUrl) => {
      proxy = await startFaultProxy(anvilUrl);
      return proxy.url;
    },
  });
  await env.registerDepositAddress('ethereum', depositAddress, ACCOUNT);
  await env.mine(3);
});
afterEach(() => proxy.clearRules());
afterAll(async () => {
  await proxy?.close();
  await env?.close();
});

const customer = (index = 6) => {
  const account = privateKeyToAccount(anvilDevPrivateKeys[index] as Hex);
  return { account, wallet: createWalletClient({ account, transport: http(env.anvil.rpcUrl) }) };
};

async function deposit(value: bigint, index = 6): Promise<{ hash: Hex; raw: Hex; block: number }> {
  const { account, wallet } = customer(index);
  const nonce = await env.chain.getTransactionCount({ address: account.address, blockTag: 'pending' });
  const raw = await wallet.signTransaction({
    chain: null,
    to: depositAddress,
    value,
    nonce,
    gas: 21_000n,
    maxFeePerGas: 100n * 10n ** 9n,
    maxPriorityFeePerGas: 10n ** 9n,
  });
  const hash = (await rpc(env.anvil.rpcUrl, 'eth_sendRawTransaction', [raw])) as Hex;
  const receipt = await env.chain.waitForTransactionReceipt({ hash });
  return { hash, raw, block: Number(receipt.blockNumber) };
}

async function credited(): Promise<bigint> {
  const balances = await withTenant(env.t.db, env.tenantId, (tx) => getBalances(tx, env.tenantId, ACCOUNT));
  return BigInt(balances.find((b) => b.asset === 'ETH')?.available ?? 0);
}

async function observation(hash: Hex): Promise<string | undefined> {
  const rows = rowsOf<{ status: string }>(
    await env.t.db.execute(
      sql`select status from deposit_observations where deposit_id = ${`${hash}:native`}`,
    ),
  );
  return rows[0]?.status;
}

async function heldEth(): Promise<bigint> {
  const balances = await withTenant(env.t.db, env.tenantId, (tx) => getBalances(tx, env.tenantId, 'acct-1'));
  return BigInt(balances.find((b) => b.asset === 'ETH')?.held ?? 0);
}

/** The canonicality checks of the deposit watcher: a block read without its transactions, a receipt. */
const canonicalityReads = (mode: '429' | 'hang') => {
  proxy.clearRules();
  return [
    proxy.addRule({ methods: ['eth_getBlockByNumber'], mode, when: (params) => params[1] === false }),
    proxy.addRule({ methods: ['eth_getTransactionReceipt'], mode }),
  ];
};

/** Clears the pool after a reorganisation so the removed transactions stay removed. */
async function reorg(depth: number): Promise<void> {
  await rpc(env.anvil.rpcUrl, 'evm_setAutomine', [false]);
  await rpc(env.anvil.rpcUrl, 'anvil_reorg', [depth, []]);
  const txpool = (await rpc(env.anvil.rpcUrl, 'txpool_content')) as {
    pending: Record<string, Record<string, { hash: string }>>;
  };
  for (const byNonce of Object.values(txpool.pending)) {
    for (const tx of Object.values(byNonce)) await rpc(env.anvil.rpcUrl, 'anvil_dropTransaction', [tx.hash]);
  }
  await rpc(env.anvil.rpcUrl, 'evm_setAutomine', [true]);
}

/**
 * The interval between the two passes is measured on the database's clock (workers' clocks may
 * differ): a test ages the recorded first passes instead of sleeping through the interval.
 */
async function ageFirstPasses(ms: number): Promise<void> {
  await env.t.db.execute(
    sql`update not_sent_observations set observed_at = observed_at - ${ms} * interval '1 millisecond'`,
  );
}

describe('I12-NODE the deposit watcher acts only on positive evidence', () => {
  /** One deposit credited at depth and one still waiting for it (1 confirmation of 2). */
  async function creditedAndPending(worker: ReturnType<Environment['worker']>) {
    await worker.runOnce();
    const before = await credited();
    const first = await deposit(ETH / 100n);
    await env.mine(1);
    await worker.runOnce();
    await worker.runOnce();
    expect(await observation(first.hash)).toBe('credited');
    expect(await credited()).toBe(before + ETH / 100n);
    const second = await deposit(ETH / 200n);
    await worker.runOnce();
    expect(await observation(second.hash)).toBe('seen');
    return { first, second, creditedBefore: await credited() };
  }

  it('I12-NODE a timeout from the node changes no money state (no orphaning, no reversal)', async () => {
    const worker = env.worker({
      rails: { evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 400 } },
    });
    const { first, second, creditedBefore } = await creditedAndPending(worker);
    const rules = canonicalityReads('hang');
    await worker.runOnce();
    await env.mine(1);
    await worker.runOnce();
    expect(rules[0]?.hits).toBeGreaterThan(0);
    expect(await observation(second.hash)).toBe('seen');
    expect(await observation(first.hash)).toBe('credited');
    expect(await credited()).toBe(creditedBefore);
    proxy.clearRules();
    await worker.runOnce();
    expect(await observation(second.hash)).toBe('credited');
    expect(await credited()).toBe(creditedBefore + ETH / 200n);
  });

  it('I12-NODE a 429 from the node changes no money state (no orphaning, no reversal)', async () => {
    const worker = env.worker();
    const { first, second, creditedBefore } = await creditedAndPending(worker);
    const rules = canonicalityReads('429');
    await worker.runOnce();
    await env.mine(1);
    await worker.runOnce();
    expect(rules[0]?.hits).toBeGreaterThan(0);
    expect(await observation(second.hash)).toBe('seen');
    expect(await observation(first.hash)).toBe('credited');
    expect(await credited()).toBe(creditedBefore);
    proxy.clearRules();
    await worker.runOnce();
    expect(await observation(second.hash)).toBe('credited');
    expect(await credited()).toBe(creditedBefore + ETH / 200n);
  });

  it('I12-NODE a lagging node that has not seen the deposit blocks changes no money state', async () => {
    const worker = env.worker();
    const { first, second, creditedBefore } = await creditedAndPending(worker);
    const lag = proxy.addRule({
      methods: [
        'eth_blockNumber',
        'eth_getBlockByNumber',
        'eth_getBlockByHash',
        'eth_getTransactionReceipt',
        'eth_getTransactionByHash',
        'eth_getTransactionCount',
        'eth_getLogs',
      ],
      mode: 'lag',
      lagHeight: first.block - 1,
    });
    await worker.runOnce();
    await env.mine(1);
    await worker.runOnce();
    expect(lag.hits).toBeGreaterThan(0);
    expect(await observation(second.hash)).toBe('seen');
    expect(await observation(first.hash)).toBe('credited');
    expect(await credited()).toBe(creditedBefore);
    proxy.clearRules();
    await worker.runOnce();
    expect(await credited()).toBe(creditedBefore + ETH / 200n);
  });

  it('I12-NODE C17 a reorganisation is acted on only when seen again on a later pass, then reverses', async () => {
    const worker = env.worker();
    await worker.runOnce();
    const before = await credited();
    const gone = await deposit(ETH / 300n);
    await env.mine(1);
    await worker.runOnce();
    await worker.runOnce();
    expect(await credited()).toBe(before + ETH / 300n);
    await reorg(3);
    await worker.runOnce();
    // One observation of a different block at that height is not yet a reorganisation.
    expect(await observation(gone.hash)).toBe('credited');
    expect(await credited()).toBe(before + ETH / 300n);
    await env.mine(1);
    await worker.runOnce();
    expect(await observation(gone.hash)).toBe('reversed');
    expect(await credited()).toBe(before);
  });

  it('I12-NODE an orphaned deposit whose transaction reappears on chain is credited', async () => {
    const worker = env.worker();
    await worker.runOnce();
    const before = await credited();
    const moved = await deposit(ETH / 400n, 7);
    await worker.runOnce();
    expect(await observation(moved.hash)).toBe('seen');
    await reorg(1);
    await worker.runOnce();
    await env.mine(1);
    await worker.runOnce();
    expect(await observation(moved.hash)).toBe('orphaned');
    expect(await credited()).toBe(before);
    // The same signed transaction is mined again, in another block.
    await rpc(env.anvil.rpcUrl, 'eth_sendRawTransaction', [moved.raw]);
    await env.chain.waitForTransactionReceipt({ hash: moved.hash });
    await worker.runOnce();
    await env.mine(1);
    await worker.runOnce();
    await worker.runOnce();
    expect(await observation(moved.hash)).toBe('credited');
    expect(await credited()).toBe(before + ETH / 400n);
  });
});

describe('I12-NODE the reconciler releases a hold only on a nonce consumed at depth by another transaction, twice', () => {
  /** A withdrawal signed with the hot wallet's next nonce whose broadcast never reached a node: UNKNOWN. */
  async function signedNeverSent(amountWei: bigint) {
    const op = await env.withdraw(amountWei);
    // The node's chain id (I32-CHAIN) and fees (I12-FEES) are read before signing; nothing else reaches it, the send included.
    const cutProxy = await startFaultProxy(env.anvil.rpcUrl);
    cutProxy.fault = 'reset-without-forward';
    cutProxy.spareMethods = ['eth_chainId', 'eth_feeHistory'];
    const cut = env.worker({
      rails: { evm: { rpcUrl: cutProxy.url, chainId: CHAIN_ID, requestTimeoutMs: 500 } },
    });
    try {
      for (let i = 0; i < 3 && (await env.operation(op.operationId)).state !== 'UNKNOWN'; i++)
        await cut.runOnce();
    } finally {
      await cutProxy.close();
    }
    const unknown = await env.operation(op.operationId);
    expect(unknown.state).toBe('UNKNOWN');
    return unknown;
  }

  it('I12-NODE a lagging node that makes a mined withdrawal look absent with its nonce consumed does not release the hold', async () => {
    const unknown = await signedNeverSent(ETH / 10n);
    const held = await heldEth();
    // Our bytes do reach the chain (someone relayed them), and are mined at depth.
    await rpc(env.anvil.rpcUrl, 'eth_sendRawTransaction', [unknown.signedArtifact]);
    const receipt = await env.chain.waitForTransactionReceipt({ hash: unknown.txHash as Hex });
    await env.mine(2);
    // Behind the load balancer, the node answering lookups by hash is behind that block; the one
    // answering heads and nonces is current.
    const lag = proxy.addRule({
      methods: ['eth_getTransactionReceipt', 'eth_getTransactionByHash'],
      mode: 'lag',
      lagHeight: Number(receipt.blockNumber) - 1,
    });
    const worker = env.worker({ notSentConfirmIntervalMs: 60_000 });
    await worker.runOnce();
    await ageFirstPasses(61_000);
    await env.mine(1);
    await worker.runOnce();
    expect(lag.hits).toBeGreaterThan(0);
    expect((await env.operation(unknown.operationId)).state).toBe('UNKNOWN');
    expect(await heldEth()).toBe(held);
    // With every node current, the payment is found and confirmed.
    proxy.clearRules();
    await worker.runOnce();
    expect((await env.operation(unknown.operationId)).state).toBe('CONFIRMED');
    expect(await env.balanceOf(unknown.destination ?? '')).toBe(ETH / 10n);
  });

  it('I12-NODE I32-FINAL a nonce consumed by another transaction at depth releases the hold only on a second pass after the interval, once it is final, across a restart', async () => {
    const unknown = await signedNeverSent(ETH / 20n);
    const held = await heldEth();
    // Someone else holding the hot wallet's key (a manual sweep, say) takes the nonce.
    const wallet = createWalletClient({
      account: privateKeyToAccount(anvilDevPrivateKeys[1] as Hex),
      transport: http(env.anvil.rpcUrl),
    });
    const other = await wallet.sendTransaction({
      chain: null,
      to: env.hotWallet,
      value: 1n,
      nonce: unknown.chainNonce ?? 0,
    });
    await env.chain.waitForTransactionReceipt({ hash: other });
    await env.mine(1);
    // Minutes: the first worker's two passes finish inside it however loaded the machine.
    const intervalMs = 60_000;
    const first = env.worker({ notSentConfirmIntervalMs: intervalMs });
    await first.runOnce();
    expect((await env.operation(unknown.operationId)).state).toBe('UNKNOWN');
    await first.runOnce();
    expect((await env.operation(unknown.operationId)).state).toBe('UNKNOWN');
    expect(await heldEth()).toBe(held);
    await ageFirstPasses(intervalMs + 1_000);
    // A restarted worker finds the first pass recorded and completes the second, once the
    // transaction that took the nonce is final (I32-FINAL; anvil finalizes 64 blocks behind).
    const restarted = env.worker({ notSentConfirmIntervalMs: intervalMs });
    await restarted.runOnce();
    expect((await env.operation(unknown.operationId)).state).toBe('UNKNOWN');
    expect(await heldEth()).toBe(held);
    await env.mine(64);
    await restarted.runOnce();
    const settled = await env.operation(unknown.operationId);
    expect(settled.state).toBe('VERIFIED_NOT_SENT');
    expect(await heldEth()).toBe(held - ETH / 20n);
    expect(await env.balanceOf(unknown.destination ?? '')).toBe(0n);
    const history = rowsOf<{ evidence: { firstPass?: { consumer?: string }; consumer?: string } }>(
      await env.t.db.execute(
        sql`select evidence from operation_transitions where operation_id = ${unknown.operationId}
             and to_state = 'VERIFIED_NOT_SENT'`,
      ),
    );
    expect(history[0]?.evidence.firstPass?.consumer?.toLowerCase()).toBe(other.toLowerCase());
  });
});
