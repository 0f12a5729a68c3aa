/**
 * I13-BAL balance-level reconciliation on a real anvil chain and real PostgreSQL (or PGlite): for
 * each asset, the tenant's ledger (custody control) against what its addresses hold at a pinned
 * block. An idle tenant (no operation pending, no work item due) is reconciled all the same, and a
 * balance the ledger does not explain is a genuine_variance break with the amounts, the block and
 * an owner; balances are never adjusted. In-flight items (a withdrawal mined but not at depth, a
 * deposit seen but not credited) explain a difference instead of breaking.
 */
import { randomBytes } from 'node:crypto';
import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  getBalances,
  getOperation,
  getRun,
  listBreaks,
  listRuns,
  observeDeposit,
  provisionHotWallet,
  registerDepositAddress,
  withTenant,
} from '@idem/core';
import { deployTestToken } from '@idem/rails';
import { rpc } from '@idem/testing/chain';
import { ageOperations } from '@idem/testing/database';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { type Hex, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BalanceContext } from '../src/balance-reconciliation/chain.ts';
import { reconcileBalances } from '../src/balance-reconciliation/run.ts';
import { tenantsWithWork } from '../src/candidates.ts';
import { RailRegistry } from '../src/rails.ts';
import { CHAIN_ID, type Environment, ETH, passAndReconcile, startEnvironment } from './environment.ts';

let env: Environment;

beforeAll(async () => {
  env = await startEnvironment();
});
afterAll(async () => {
  await env.close();
});

async function setBalance(address: string, wei: bigint): Promise<void> {
  await rpc(env.anvil.rpcUrl, 'anvil_setBalance', [address, toHex(wei)]);
}

/** A tenant whose hot wallet is a fresh key holding exactly what its ledger says, and a USDC token. */
async function fundedTenant(ethMinor: bigint, usdcMinor: bigint) {
  const key = generatePrivateKey();
  const keyVariable = `BALANCE_TEST_KEY_${randomBytes(4).toString('hex').toUpperCase()}`;
  process.env[keyVariable] = key;
  const hotWallet = privateKeyToAccount(key).address;
  await setBalance(hotWallet, ETH);
  // Deployed by the hot wallet itself, so the whole supply is what it holds.
  const usdc = await deployTestToken({
    rpcUrl: env.rpcUrl,
    chainId: CHAIN_ID,
    privateKey: key,
    symbol: 'USDC',
    decimals: 6,
    supplyMinor: usdcMinor,
  });
  await setBalance(hotWallet, ethMinor);
  const { tenantId } = await createTenant(env.t.db, {
    name: `Idle ${randomBytes(3).toString('hex')}`,
    assets: [
      { code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 2 },
      { code: 'USDC', network: 'ethereum', decimals: 6, confirmations: 2, contractAddress: usdc },
    ],
  });
  await provisionHotWallet(env.t.db, {
    tenantId,
    network: 'ethereum',
    address: hotWallet,
    keyRef: `env:${keyVariable}`,
    // The token deployment used nonce 0.
    nextNonce: 1,
  });
  await provisionRiskPolicy(env.t.db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: (10n * ETH).toString(),
    fourEyesMinMinor: (100n * ETH).toString(),
    actor: 'test',
  });
  // The opening balances, as the deployment's own tools credit them (no chain evidence).
  for (const [asset, amount] of [
    ['ETH', ethMinor],
    ['USDC', usdcMinor],
  ] as const) {
    await creditAsOperator(env.t.db, {
      tenantId,
      deposit: {
        reference: `opening-${asset}`,
        accountId: 'acct-a',
        asset,
        amountMinor: amount.toString(),
      },
      idempotencyKey: `opening-${asset}`,
      actor: 'test',
    });
  }
  return { tenantId, hotWallet, usdc };
}

/**
 * Runs passes until the tenant has nothing due: its deposit notifications delivered and its
 * confirmations older than the (one-second) reorganisation window the workers here watch.
 */
const REORG_WINDOW_SECONDS = 1;
async function makeIdle(tenantId: string): Promise<void> {
  const worker = env.worker({ reorgWindowSeconds: REORG_WINDOW_SECONDS });
  // The confirmations age past the one-second reorganisation window: moved back on the database's
  // clock rather than waited for.
  await ageOperations(
    env.t.db,
    sql`tenant_id = ${tenantId}::uuid and state = 'CONFIRMED'`,
    REORG_WINDOW_SECONDS + 1,
  );
  for (let i = 0; i < 5 && (await tenantsWithWork(env.t.db, REORG_WINDOW_SECONDS)).includes(tenantId); i++) {
    await worker.runOnce();
  }
  expect(await tenantsWithWork(env.t.db, REORG_WINDOW_SECONDS)).not.toContain(tenantId);
}

const contextFor = (): BalanceContext => ({
  db: env.t.db,
  rails: new RailRegistry({ evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID } }),
  log: pino({ level: 'silent' }),
});

const breaksOf = (tenantId: string) =>
  withTenant(env.t.db, tenantId, (tx) => listBreaks(tx, { tenantId, status: 'open' }));
const runsOf = (tenantId: string) => withTenant(env.t.db, tenantId, (tx) => listRuns(tx, { tenantId }));

describe('balance-level reconciliation', () => {
  it('I13-BAL C21 an idle tenant with a variance gets a break (amounts, pinned block, owner), balances untouched', async () => {
    const { tenantId, hotWallet } = await fundedTenant(5n * ETH, 7_000_000n);
    await makeIdle(tenantId);
    // One ETH leaves the hot wallet with no withdrawal in the ledger (a stolen key, say).
    await setBalance(hotWallet, 4n * ETH);
    const before = await withTenant(env.t.db, tenantId, (tx) => getBalances(tx, tenantId, 'acct-a'));

    await passAndReconcile(env, { reconcileEveryMs: 1, reorgWindowSeconds: REORG_WINDOW_SECONDS });

    const breaks = await breaksOf(tenantId);
    expect(breaks.map((b) => [b.breakClass, b.subject])).toEqual([
      ['genuine_variance', 'balance:chain:ethereum:ETH'],
    ]);
    const found = breaks[0];
    expect(found?.ledgerAmountMinor).toBe((5n * ETH).toString());
    expect(found?.observedAmountMinor).toBe((4n * ETH).toString());
    expect(found?.owner).toBe('finance-controller');
    const details = found?.details as { pinnedBlock: number; unexplainedMinor: string; runId: string };
    expect(details.unexplainedMinor).toBe((-ETH).toString());
    expect(details.pinnedBlock).toBeGreaterThan(0);
    expect(await withTenant(env.t.db, tenantId, (tx) => getBalances(tx, tenantId, 'acct-a'))).toEqual(before);

    const [run] = await runsOf(tenantId);
    expect(run?.result).toBe('variance');
    expect(run?.ranBy).toMatch(/^worker:/);
    expect(run?.breaksOpened).toBe(1);
    const detail = await withTenant(env.t.db, tenantId, (tx) =>
      getRun(tx, { tenantId, runId: details.runId }),
    );
    const eth = detail.figures.find((f) => f.assetCode === 'ETH');
    expect(eth).toMatchObject({
      place: 'chain:ethereum',
      liabilitiesAvailableMinor: (5n * ETH).toString(),
      custodyControlMinor: (5n * ETH).toString(),
      observedMinor: (4n * ETH).toString(),
      unexplainedMinor: (-ETH).toString(),
      breakId: found?.breakId,
    });
    // The ERC-20 holdings agree: no break for USDC.
    expect(detail.figures.find((f) => f.assetCode === 'USDC')).toMatchObject({
      observedMinor: '7000000',
      unexplainedMinor: '0',
      breakId: null,
    });
  });

  it('I13-BAL an idle tenant in agreement gets a balanced run and no break', async () => {
    const { tenantId } = await fundedTenant(3n * ETH, 1_000n);
    await makeIdle(tenantId);
    await passAndReconcile(env, { reconcileEveryMs: 1, reorgWindowSeconds: REORG_WINDOW_SECONDS });
    expect(await breaksOf(tenantId)).toEqual([]);
    const [run] = await runsOf(tenantId);
    expect(run?.result).toBe('balanced');
  });

  it('I13-BAL a deposit seen on chain but not yet credited explains the difference instead of breaking', async () => {
    const { tenantId } = await fundedTenant(2n * ETH, 1_000n);
    const depositAddress = privateKeyToAccount(generatePrivateKey()).address;
    await withTenant(env.t.db, tenantId, (tx) =>
      registerDepositAddress(tx, {
        tenantId,
        network: 'ethereum',
        address: depositAddress,
        accountRef: 'acct-a',
      }),
    );
    await setBalance(depositAddress, ETH / 2n);
    const head = Number(await env.chain.getBlockNumber());
    const block = await env.chain.getBlock({ blockNumber: BigInt(head) });
    await withTenant(env.t.db, tenantId, (tx) =>
      observeDeposit(tx, {
        tenantId,
        depositId: `0x${randomBytes(32).toString('hex')}:native`,
        network: 'ethereum',
        accountRef: 'acct-a',
        assetCode: 'ETH',
        amountMinor: (ETH / 2n).toString(),
        blockNumber: head,
        blockHash: block.hash as Hex,
      }),
    );
    // Called directly: a worker pass would run the deposit watcher, which owns the observation.
    const report = await reconcileBalances(contextFor(), tenantId, { ranBy: 'test', trigger: 'on_demand' });
    expect(report.result).toBe('explained');
    expect(await breaksOf(tenantId)).toEqual([]);
    const [run] = await runsOf(tenantId);
    expect(run?.result).toBe('explained');
    const detail = await withTenant(env.t.db, tenantId, (tx) =>
      getRun(tx, { tenantId, runId: run?.runId ?? '' }),
    );
    expect(detail.figures.find((f) => f.assetCode === 'ETH')?.explanations).toEqual([
      expect.objectContaining({ kind: 'deposit_seen_not_credited', amountMinor: (ETH / 2n).toString() }),
    ]);
  });

  it('I13-BAL a withdrawal mined but not yet at depth explains the difference (amount and gas), no break', async () => {
    const { tenantId } = await fundedTenant(4n * ETH, 1_000n);
    const destination = privateKeyToAccount(generatePrivateKey()).address;
    const created = await withTenant(env.t.db, tenantId, (tx) =>
      createWithdrawal(tx, {
        tenantId,
        request: {
          withdrawalId: 'w-1',
          accountId: 'acct-a',
          asset: 'ETH',
          destination,
          amountMinor: ETH.toString(),
        },
        idempotencyKey: 'withdrawal-w-1',
      }),
    );
    const worker = env.worker();
    for (let i = 0; i < 4; i++) await worker.runOnce();
    // Mined (anvil mines at once) and at depth 1 of the 2 ETH needs: still BROADCAST, still held.
    const op = await withTenant(env.t.db, tenantId, async (tx) =>
      getOperation(tx, tenantId, created.operation.operationId),
    );
    expect(op.state).toBe('BROADCAST');
    const report = await reconcileBalances(contextFor(), tenantId, { ranBy: 'test', trigger: 'on_demand' });
    const eth = report.figures.find((f) => f.assetCode === 'ETH');
    expect(eth?.inFlightWithdrawalsMinor).toBe(ETH.toString());
    expect(eth?.explanations.map((e) => e.kind).sort()).toEqual([
      'gas_of_unsettled_withdrawal',
      'withdrawal_mined_not_settled',
    ]);
    expect(eth?.unexplainedMinor).toBe('0');
    expect(report.result).toBe('explained');
    expect(await breaksOf(tenantId)).toEqual([]);
  });
});
