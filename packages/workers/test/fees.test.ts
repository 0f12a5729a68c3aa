import { withdrawalRequestSchema } from '@idem/contracts';
import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  getHotWallet,
  getOperation,
  type Operation,
  postEntry,
  provisionHotWallet,
  rowsOf,
  toStaffView,
  toView,
  transition,
  withTenant,
} from '@idem/core';
import { anvilDevPrivateKeys, deployTestToken, testTokenAbi } from '@idem/rails';
import { GWEI } from '@idem/testing/chain';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { type Address, getAddress, type Hex, parseTransaction } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerContext } from '../src/context.ts';
import { RailRegistry } from '../src/rails.ts';
import { reconcileTenant } from '../src/reconciliation.ts';
import { CHAIN_ID, type Environment, ETH, rpc, startEnvironment } from './environment.ts';

let env: Environment;
let usdc: { tenantId: string; token: Address; hotWallet: Address };

beforeAll(async () => {
  env = await startEnvironment();
  // A second tenant withdrawing USDC (an ERC-20) from a hot wallet that holds the token supply.
  const key = anvilDevPrivateKeys[3] as Hex;
  const token = await deployTestToken({
    rpcUrl: env.anvil.rpcUrl,
    chainId: CHAIN_ID,
    privateKey: key,
    symbol: 'USDC',
    decimals: 6,
    supplyMinor: 10n ** 12n,
  });
  const hotWallet = privateKeyToAccount(key).address;
  const { tenantId } = await createTenant(env.t.db, {
    name: 'USDC Exchange',
    assets: [{ code: 'USDC', network: 'ethereum', decimals: 6, confirmations: 2, contractAddress: token }],
  });
  await provisionHotWallet(env.t.db, {
    tenantId,
    network: 'ethereum',
    address: hotWallet,
    keyRef: 'dev:3',
    nextNonce: await env.chain.getTransactionCount({ address: hotWallet }),
  });
  await creditAsOperator(env.t.db, {
    tenantId,
    deposit: { reference: 'usdc-funding', accountId: 'acct-u', asset: 'USDC', amountMinor: '100000000' },
    idempotencyKey: 'usdc-funding',
    actor: 'test',
  });
  await provisionRiskPolicy(env.t.db, {
    tenantId,
    assetCode: 'USDC',
    autoApproveMaxMinor: '1000000000',
    fourEyesMinMinor: '100000000000',
    actor: 'test',
  });
  usdc = { tenantId, token, hotWallet };
});
afterAll(() => env.close());
afterEach(() => setNextBaseFee(GWEI));

async function setNextBaseFee(wei: bigint): Promise<void> {
  await rpc(env.anvil.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${wei.toString(16)}`]);
}

let counter = 0;
async function withdraw(
  tenantId: string,
  request: { asset: string; amountMinor: bigint; feeCapMinor?: bigint; accountId?: string },
): Promise<Operation> {
  counter += 1;
  const withdrawalId = `fee-${counter}-${Date.now()}`;
  const created = await withTenant(env.t.db, tenantId, (tx) =>
    createWithdrawal(tx, {
      tenantId,
      request: {
        withdrawalId,
        accountId: request.accountId ?? (request.asset === 'USDC' ? 'acct-u' : 'acct-1'),
        asset: request.asset,
        destination: getAddress(`0x${(BigInt(counter) + 0xfee0000n).toString(16).padStart(40, '0')}`),
        amountMinor: request.amountMinor.toString(),
        ...(request.feeCapMinor !== undefined ? { feeCapMinor: request.feeCapMinor.toString() } : {}),
      },
      idempotencyKey: `withdrawal-${withdrawalId}`,
    }),
  );
  return created.operation;
}

const read = (tenantId: string, id: string) =>
  withTenant(env.t.db, tenantId, (tx) => getOperation(tx, tenantId, id));

function signedFees(op: Operation) {
  const parsed = parseTransaction(op.signedArtifact as Hex);
  return {
    maxFeePerGas: parsed.maxFeePerGas ?? 0n,
    maxPriorityFeePerGas: parsed.maxPriorityFeePerGas ?? 0n,
    gas: parsed.gas ?? 0n,
  };
}

/** Net postings of one operation to one account in one asset. */
async function netPosted(tenantId: string, operationId: string, account: string, asset: string) {
  const rows = await withTenant(env.t.db, tenantId, async (tx) =>
    rowsOf<{ total: string | null }>(
      await tx.execute(sql`select sum(p.amount)::text as total from postings p
        join journal_entries e on e.tenant_id = p.tenant_id and e.entry_id = p.entry_id
        where e.operation_id = ${operationId}::uuid and p.account = ${account} and p.asset_code = ${asset}`),
    ),
  );
  return BigInt(rows[0]?.total ?? '0');
}

describe('I12-FEES fees from the node, the fee cap in native units, the gas paid in the ledger', () => {
  it('I12-FEES fees are quoted from the node: a signed transaction follows a base fee raised with anvil_setNextBlockBaseFeePerGas', async () => {
    await setNextBaseFee(30n * GWEI);
    const op = await withdraw(env.tenantId, { asset: 'ETH', amountMinor: ETH / 100n });
    await env.worker().runOnce();
    const sent = await read(env.tenantId, op.operationId);
    expect(sent.state).toBe('BROADCAST');
    const fees = signedFees(sent);
    // The default policy: twice the pending block's base fee, plus the priority fee.
    expect(fees.maxFeePerGas - fees.maxPriorityFeePerGas).toBe(60n * GWEI);
    expect(fees.maxPriorityFeePerGas).toBeGreaterThan(0n);
    const receipt = await env.chain.getTransactionReceipt({ hash: sent.txHash as Hex });
    const block = await env.chain.getBlock({ blockNumber: receipt.blockNumber });
    expect(block.baseFeePerGas).toBe(30n * GWEI);
  });

  it("I12-FEES a USDC withdrawal's fee cap is in wei of ETH: the transaction may cost at most feeCapMinor wei in total", async () => {
    // An operator who reads the cap as "5 USDC" writes 5,000,000; in wei of ETH that cannot pay
    // 100,000 gas at any base fee, so nothing may be signed (the old code signed at 50 wei per gas).
    const tooLow = await withdraw(usdc.tenantId, {
      asset: 'USDC',
      amountMinor: 1_000_000n,
      feeCapMinor: 5_000_000n,
    });
    await env.worker().runOnce();
    const waiting = await read(usdc.tenantId, tooLow.operationId);
    expect(waiting.state).toBe('APPROVED');
    expect(waiting.signedArtifact).toBeNull();
    expect(toView(waiting).waitingReason).toMatch(/wei/);

    // 0.01 ETH: enough at today's base fee; the signed transaction's worst case stays within it.
    const cap = ETH / 100n;
    const op = await withdraw(usdc.tenantId, { asset: 'USDC', amountMinor: 2_000_000n, feeCapMinor: cap });
    await env.worker().runOnce();
    const sent = await read(usdc.tenantId, op.operationId);
    expect(sent.state).toBe('BROADCAST');
    const fees = signedFees(sent);
    expect(fees.gas * fees.maxFeePerGas).toBeLessThanOrEqual(cap);
    const base = (await env.chain.getBlock({ blockTag: 'latest' })).baseFeePerGas ?? 0n;
    expect(fees.maxFeePerGas).toBeLessThan(100n * GWEI);
    expect(fees.maxFeePerGas).toBeGreaterThanOrEqual(base);
  });

  it('I12-FEES a fee cap is validated per network at submission', async () => {
    await expect(
      withdraw(env.tenantId, { asset: 'ETH', amountMinor: 1n, feeCapMinor: 20_999n }),
    ).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(
      withdraw(env.tenantId, { asset: 'BTC', amountMinor: 1000n, feeCapMinor: 5000n }),
    ).rejects.toMatchObject({ code: 'VALIDATION', message: expect.stringMatching(/bitcoin/) });
    // With the network named, the contract schema refuses it before any database is asked.
    const base = { withdrawalId: 'w', accountId: 'a', asset: 'USDC', destination: 'x', amountMinor: '1' };
    const parses = (network: string, feeCapMinor: string) =>
      withdrawalRequestSchema.safeParse({ ...base, network, feeCapMinor }).success;
    expect(parses('ethereum', '20999')).toBe(false);
    expect(parses('bitcoin', '5000')).toBe(false);
    expect(parses('ethereum', '21000')).toBe(true);
  });

  it('I12-FEES a cap too low for the current base fee keeps the withdrawal APPROVED with the reason visible and nothing signed; it proceeds after the base fee falls', async () => {
    // 21,000 gas at 20 gwei at most: 50 gwei base fee cannot be paid.
    const cap = 21_000n * 20n * GWEI;
    await setNextBaseFee(50n * GWEI);
    const nonceBefore = await withTenant(env.t.db, env.tenantId, (tx) =>
      getHotWallet(tx, env.tenantId, 'ethereum'),
    );
    const op = await withdraw(env.tenantId, { asset: 'ETH', amountMinor: ETH / 50n, feeCapMinor: cap });
    const worker = env.worker();
    await worker.runOnce();
    await worker.runOnce();
    const waiting = await read(env.tenantId, op.operationId);
    expect(waiting.state).toBe('APPROVED');
    expect(waiting.signedArtifact).toBeNull();
    expect(waiting.chainNonce).toBeNull();
    const nonceAfter = await withTenant(env.t.db, env.tenantId, (tx) =>
      getHotWallet(tx, env.tenantId, 'ethereum'),
    );
    expect(nonceAfter.nextNonce).toBe(nonceBefore.nextNonce);
    const staff = await withTenant(env.t.db, env.tenantId, (tx) => toStaffView(tx, waiting));
    expect(staff.waitingReason).toMatch(/fee cap/);
    const history = await withTenant(env.t.db, env.tenantId, async (tx) =>
      rowsOf<{ reason: string }>(
        await tx.execute(
          sql`select reason from operation_transitions where operation_id = ${op.operationId}::uuid order by seq`,
        ),
      ),
    );
    // Entered once, however many passes it waits.
    expect(history.filter((row) => /fee cap/.test(row.reason))).toHaveLength(1);
    expect(await env.balanceOf(op.destination ?? '')).toBe(0n);

    // The base fee falls: the next pass signs within the cap.
    await setNextBaseFee(GWEI);
    await env.mine(1);
    await worker.runOnce();
    const sent = await read(env.tenantId, op.operationId);
    expect(sent.state).toBe('BROADCAST');
    expect(toView(sent).waitingReason).toBeNull();
    const fees = signedFees(sent);
    expect(fees.gas * fees.maxFeePerGas).toBeLessThanOrEqual(cap);
    expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 50n);
  });

  it("I12-FEES on confirmation the fee entry equals gasUsed*effectiveGasPrice from the real receipt; custody control and fee expense reconcile with the hot wallet's on-chain balance change", async () => {
    await setNextBaseFee(7n * GWEI);
    const ethBefore = await env.balanceOf(env.hotWallet);
    const usdcEthBefore = await env.balanceOf(usdc.hotWallet);
    const usdcTokenBefore = await tokenBalance(usdc.hotWallet);
    const amount = ETH / 20n;
    const ethOp = await withdraw(env.tenantId, { asset: 'ETH', amountMinor: amount });
    const tokenOp = await withdraw(usdc.tenantId, { asset: 'USDC', amountMinor: 3_000_000n });
    const worker = env.worker();
    await worker.runOnce();
    await env.mine(2);
    await worker.runOnce();
    const ethDone = await read(env.tenantId, ethOp.operationId);
    const tokenDone = await read(usdc.tenantId, tokenOp.operationId);
    expect(ethDone.state).toBe('CONFIRMED');
    expect(tokenDone.state).toBe('CONFIRMED');

    const paid = async (hash: string) => {
      const receipt = await env.chain.getTransactionReceipt({ hash: hash as Hex });
      return receipt.gasUsed * receipt.effectiveGasPrice;
    };
    const ethFee = await paid(ethDone.txHash ?? '');
    const tokenFee = await paid(tokenDone.txHash ?? '');
    expect(ethFee).toBeGreaterThan(0n);
    // The expense, in ETH, for the ERC-20 withdrawal too.
    expect(await netPosted(env.tenantId, ethOp.operationId, '@network_fees', 'ETH')).toBe(-ethFee);
    expect(await netPosted(usdc.tenantId, tokenOp.operationId, '@network_fees', 'ETH')).toBe(-tokenFee);
    // What left custody: the amount and the gas, which is exactly what the hot wallet lost on chain.
    const ethCustody = await netPosted(env.tenantId, ethOp.operationId, '@custody', 'ETH');
    expect(ethCustody).toBe(amount + ethFee);
    expect(ethBefore - (await env.balanceOf(env.hotWallet))).toBe(ethCustody);
    const tokenCustodyEth = await netPosted(usdc.tenantId, tokenOp.operationId, '@custody', 'ETH');
    expect(usdcEthBefore - (await env.balanceOf(usdc.hotWallet))).toBe(tokenCustodyEth);
    expect(usdcTokenBefore - (await tokenBalance(usdc.hotWallet))).toBe(
      await netPosted(usdc.tenantId, tokenOp.operationId, '@custody', 'USDC'),
    );

    // Reconciliation compares the fee posted with the receipt: nothing to report.
    const report = await reconcileTenant(workerContext(), env.tenantId);
    expect(report.findings.filter((f) => f.subject === `operation:${ethOp.operationId}`)).toEqual([]);

    // Posted once: a second fee entry for the same operation is refused by the database.
    await expect(
      withTenant(env.t.db, env.tenantId, (tx) =>
        postEntry(tx, {
          tenantId: env.tenantId,
          operationId: ethOp.operationId,
          kind: 'network_fee',
          postings: [
            { account: '@custody', bucket: 'control', assetCode: 'ETH', amount: ethFee },
            { account: '@network_fees', bucket: 'control', assetCode: 'ETH', amount: -ethFee },
          ],
        }),
      ),
    ).rejects.toThrow();

    // A reorganisation that un-confirms it reverses the fee with a compensating entry.
    await withTenant(env.t.db, env.tenantId, (tx) =>
      transition(tx, ethDone, 'BROADCAST', { actor: 'test', reason: 'reorg' }),
    );
    expect(await netPosted(env.tenantId, ethOp.operationId, '@network_fees', 'ETH')).toBe(0n);
    expect(await netPosted(env.tenantId, ethOp.operationId, '@custody', 'ETH')).toBe(0n);
    // Seen again at depth: confirmed again, the fee posted again, once.
    await worker.runOnce();
    expect((await read(env.tenantId, ethOp.operationId)).state).toBe('CONFIRMED');
    expect(await netPosted(env.tenantId, ethOp.operationId, '@network_fees', 'ETH')).toBe(-ethFee);
  });

  it('I12-FEES reconciliation reports a confirmed withdrawal whose posted network fee does not explain the hot wallet balance', async () => {
    const op = await withdraw(env.tenantId, { asset: 'ETH', amountMinor: ETH / 40n });
    const worker = env.worker();
    await worker.runOnce();
    await env.mine(2);
    // Confirmed the way the old code did: the settle alone, no fee entry.
    const broadcast = await read(env.tenantId, op.operationId);
    expect(broadcast.state).toBe('BROADCAST');
    await withTenant(env.t.db, env.tenantId, (tx) =>
      transition(tx, broadcast, 'CONFIRMED', { actor: 'test', reason: 'confirmed without its fee' }),
    );
    const receipt = await env.chain.getTransactionReceipt({ hash: broadcast.txHash as Hex });
    const report = await reconcileTenant(workerContext(), env.tenantId, { timingWindowMs: 0 });
    const finding = report.findings.find((f) => f.subject === `operation:${op.operationId}`);
    expect(finding).toMatchObject({
      breakClass: 'genuine_variance',
      assetCode: 'ETH',
      ledgerAmountMinor: '0',
      observedAmountMinor: (receipt.gasUsed * receipt.effectiveGasPrice).toString(),
    });
    expect(finding?.reason).toMatch(/network fee/);
  });
});

async function tokenBalance(address: Address): Promise<bigint> {
  return env.chain.readContract({
    address: usdc.token,
    abi: testTokenAbi,
    functionName: 'balanceOf',
    args: [address],
  }) as Promise<bigint>;
}

function workerContext(): WorkerContext {
  return {
    db: env.t.db,
    rails: new RailRegistry({ evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID } }),
    log: env.log,
    workerId: 'reconciler-test',
    leaseMs: 5_000,
    batchSize: 20,
    reorgWindowSeconds: 3_600,
    notSentConfirmIntervalMs: 0,
    unknownEscalateAfterMs: 60_000,
    escalationOwner: 'ops',
    now: Date.now,
  };
}
