import { listAttempts, type Operation, schema, withTenant } from '@idem/core';
import { onPostgres } from '@idem/core/testing';
import { and, desc, eq } from 'drizzle-orm';
import type { Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, ETH, rpc, startEnvironment } from './environment.ts';

const GWEI = 10n ** 9n;
let env: Environment;

beforeAll(async () => {
  // Blocks only when the test mines them, so a transaction can sit in the pool.
  env = await startEnvironment({ mining: 'manual' });
});
afterAll(() => env.close());

/** A worker signing at a fixed low fee (2 gwei), bumping as soon as a withdrawal is seen stuck. */
function lowFeeWorker(policy = { bumpAfterMs: 0, maxBumps: 3 }) {
  return env.worker({
    rails: {
      evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000 },
      fees: { maxFeePerGasWei: 2n * GWEI, maxPriorityFeePerGasWei: GWEI },
    },
    replacePolicies: { ethereum: policy },
  });
}

async function minedNonce(): Promise<number> {
  return env.chain.getTransactionCount({ address: env.hotWallet, blockTag: 'latest' });
}

/** Raises the base fee far above what the original pays, and mines a block without it. */
async function feeSpike(): Promise<void> {
  await rpc(env.anvil.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${(50n * GWEI).toString(16)}`]);
  await env.mine(1);
}

async function attemptsOf(op: Operation) {
  return withTenant(env.t.db, env.tenantId, (tx) => listAttempts(tx, env.tenantId, op.operationId));
}

async function lastTransition(op: Operation) {
  const rows = await withTenant(env.t.db, env.tenantId, (tx) =>
    tx
      .select()
      .from(schema.operationTransitions)
      .where(
        and(
          eq(schema.operationTransitions.tenantId, env.tenantId),
          eq(schema.operationTransitions.operationId, op.operationId),
        ),
      )
      .orderBy(desc(schema.operationTransitions.seq))
      .limit(1),
  );
  return rows[0];
}

/** Sends a stuck withdrawal: signed at 2 gwei, broadcast, then a base fee of 50 gwei. */
async function stuckWithdrawal(amount: bigint) {
  const nonceBefore = await minedNonce();
  const op = await env.withdraw(amount);
  await lowFeeWorker({ bumpAfterMs: 60 * 60_000, maxBumps: 3 }).runOnce();
  await feeSpike();
  const stuck = await env.operation(op.operationId);
  expect(stuck.state).toBe('BROADCAST');
  expect(await minedNonce()).toBe(nonceBefore);
  return { op: stuck, nonceBefore };
}

describe.skipIf(!onPostgres)('stuck withdrawals: fee bump, cancel, nonce gaps (real anvil, real PostgreSQL)', () => {
  it('I12-BUMP a withdrawal stuck under a rising base fee is bumped automatically and mined once', async () => {
    const { op, nonceBefore } = await stuckWithdrawal(ETH / 10n);
    const worker = lowFeeWorker();
    await worker.runOnce();
    const attempts = await attemptsOf(op);
    expect(attempts.map((a) => a.kind)).toEqual(['original', 'replacement']);
    const [original, bump] = attempts;
    expect(bump?.nonce).toBe(op.chainNonce);
    // At least +12.5% on both fees, and enough for the current base fee.
    expect(BigInt(bump?.maxFeePerGas ?? 0)).toBeGreaterThanOrEqual((BigInt(original?.maxFeePerGas ?? 0) * 9n) / 8n);
    expect(BigInt(bump?.maxPriorityFeePerGas ?? 0)).toBeGreaterThanOrEqual(
      (BigInt(original?.maxPriorityFeePerGas ?? 0) * 9n) / 8n,
    );
    expect(BigInt(bump?.maxFeePerGas ?? 0)).toBeGreaterThan(40n * GWEI);
    await env.mine(3);
    await worker.runOnce();
    const final = await env.operation(op.operationId);
    expect(final.state).toBe('CONFIRMED');
    // The original bytes stay; the replacement is the settled transaction.
    expect(final.signedArtifact).toBe(op.signedArtifact);
    expect(final.txHash).toBe(op.txHash);
    const confirmed = await lastTransition(op);
    expect(confirmed?.evidence).toMatchObject({ settledTxHash: bump?.txHash, settledAttemptNo: 2 });
    // Exactly one transfer: one nonce consumed, the destination paid once.
    expect(await minedNonce()).toBe(nonceBefore + 1);
    expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 10n);
    const receipt = await env.chain.getTransactionReceipt({ hash: bump?.txHash as Hex });
    expect(receipt.status).toBe('success');
  });
});
