import {
  decideProposal,
  getBalances,
  listAttempts,
  type Operation,
  propose,
  requestFeeBump,
  schema,
  walletNonceView,
  withTenant,
} from '@idem/core';
import { anvilDevPrivateKeys, createEvmRail } from '@idem/rails';
import { GWEI } from '@idem/testing/chain';
import { expireLease, onPostgres } from '@idem/testing/database';
import { staffMember } from '@idem/testing/tenants';
import { and, desc, eq } from 'drizzle-orm';
import type { Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, ETH, rpc, startEnvironment } from './environment.ts';
import { killWorkerAt as killWorker } from './processes/kill-worker.ts';

const LEASE_MS = 1_500;
let env: Environment;

beforeAll(async () => {
  // Blocks only when the test mines them, so a transaction can sit in the pool.
  env = await startEnvironment({ mining: 'manual' });
});
afterAll(() => env.close());

/** A worker signing at the node's quote (about 2 gwei before the spike), bumping as soon as a withdrawal is seen stuck. */
function lowFeeWorker(policy = { bumpAfterMs: 0, maxBumps: 3 }) {
  return env.worker({
    rails: {
      evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000 },
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

/**
 * Sends a stuck withdrawal: signed at 2 gwei and broadcast; then (spike) a base fee of 50 gwei,
 * which makes anvil drop it from its pool (a dropped transaction that needs a bump), or (no spike)
 * no block at all, so it waits in the pool.
 */
async function stuckWithdrawal(amount: bigint, spike = true) {
  // A calm chain first (1 gwei), so the 2 gwei original is accepted into the pool.
  await rpc(env.anvil.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${GWEI.toString(16)}`]);
  await env.mine(1);
  const nonceBefore = await minedNonce();
  const op = await env.withdraw(amount);
  await lowFeeWorker({ bumpAfterMs: 60 * 60_000, maxBumps: 3 }).runOnce();
  if (spike) await feeSpike();
  const stuck = await env.operation(op.operationId);
  expect(stuck.state).toBe('BROADCAST');
  expect(await minedNonce()).toBe(nonceBefore);
  return { op: stuck, nonceBefore };
}

describe.skipIf(!onPostgres)(
  'stuck withdrawals: fee bump, cancel, nonce gaps (real anvil, real PostgreSQL)',
  () => {
    it('I12-BUMP a withdrawal stuck under a rising base fee is bumped automatically and mined once', async () => {
      const { op, nonceBefore } = await stuckWithdrawal(ETH / 10n);
      const worker = lowFeeWorker();
      await worker.runOnce();
      const attempts = await attemptsOf(op);
      expect(attempts.map((a) => a.kind)).toEqual(['original', 'replacement']);
      const [original, bump] = attempts;
      expect(bump?.nonce).toBe(op.chainNonce);
      // At least the policy's raise on both fees (10%, the pool's minimum), and enough for the
      // current base fee.
      expect(BigInt(bump?.maxFeePerGas ?? 0)).toBeGreaterThanOrEqual(
        (BigInt(original?.maxFeePerGas ?? 0) * 110n) / 100n,
      );
      expect(BigInt(bump?.maxPriorityFeePerGas ?? 0)).toBeGreaterThanOrEqual(
        (BigInt(original?.maxPriorityFeePerGas ?? 0) * 110n) / 100n,
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

    it('I12-CANCEL I32-FINAL a cancel approved by a second person is mined: the hold stays until the cancel is final, then VERIFIED_NOT_SENT, hold released, destination unpaid', async () => {
      const amount = ETH / 20n;
      const { op, nonceBefore } = await stuckWithdrawal(amount);
      const heldBefore = await held();
      await approveCancel(op);
      const worker = lowFeeWorker({ bumpAfterMs: 60 * 60_000, maxBumps: 3 });
      await worker.runOnce();
      const attempts = await attemptsOf(op);
      expect(attempts.map((a) => a.kind)).toEqual(['original', 'cancel']);
      const cancel = attempts[1];
      expect(cancel?.requestedBy).toMatch(/^proposal:/);
      // At the asset's depth but not final: a deep reorganisation could still swap the cancel for
      // the payment, so releasing now could leave the funds both released and paid.
      await env.mine(3);
      await worker.runOnce();
      expect((await env.operation(op.operationId)).state).toBe('BROADCAST');
      expect(await held()).toBe(heldBefore);
      // Final (anvil finalizes 64 blocks behind its head): released.
      await env.mine(64);
      await worker.runOnce();
      const final = await env.operation(op.operationId);
      expect(final.state).toBe('VERIFIED_NOT_SENT');
      expect((await lastTransition(op))?.evidence).toMatchObject({
        settledTxHash: cancel?.txHash,
        settledAttemptKind: 'cancel',
      });
      expect(await held()).toBe(heldBefore - amount);
      expect(await env.balanceOf(op.destination ?? '')).toBe(0n);
      // The cancel took the nonce: a zero-value transaction from the hot wallet to itself.
      expect(await minedNonce()).toBe(nonceBefore + 1);
      const mined = await env.chain.getTransaction({ hash: cancel?.txHash as Hex });
      expect(mined.to?.toLowerCase()).toBe(env.hotWallet.toLowerCase());
      expect(mined.value).toBe(0n);
      expect(await env.chain.getTransactionReceipt({ hash: op.txHash as Hex }).catch(() => null)).toBeNull();
    });

    it('I12-CANCEL the original mined after the cancel was approved: CONFIRMED, the cancel never mined', async () => {
      const amount = ETH / 30n;
      const { op, nonceBefore } = await stuckWithdrawal(amount, false);
      expect(await poolHashes()).toEqual([op.txHash?.toLowerCase()]);
      await approveCancel(op);
      // A block comes before any worker signs the cancel: the original is mined.
      await rpc(env.anvil.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${GWEI.toString(16)}`]);
      await env.mine(3);
      await lowFeeWorker().runOnce();
      const final = await env.operation(op.operationId);
      expect(final.state).toBe('CONFIRMED');
      expect((await lastTransition(op))?.evidence).toMatchObject({
        settledTxHash: op.txHash,
        settledAttemptNo: 1,
      });
      const cancels = (await attemptsOf(op)).filter((a) => a.kind === 'cancel');
      for (const cancel of cancels) {
        expect(
          await env.chain.getTransactionReceipt({ hash: cancel.txHash as Hex }).catch(() => null),
        ).toBeNull();
      }
      await env.mine(2);
      expect(await minedNonce()).toBe(nonceBefore + 1);
      expect(await env.balanceOf(op.destination ?? '')).toBe(amount);
    });

    it('I12-BUMP a worker killed (SIGKILL) between signing a replacement and recording it: nothing was sent, one nonce, one transfer', async () => {
      const amount = ETH / 40n;
      const { op, nonceBefore } = await stuckWithdrawal(amount);
      await killWorkerAt('replacement-signed', op.operationId);
      // Signed in memory only: the transaction that would have recorded it rolled back, and the node
      // has nothing of ours (the fee spike evicted the original).
      expect((await attemptsOf(op)).map((a) => a.kind)).toEqual(['original']);
      expect(await poolHashes()).toEqual([]);
      const worker = lowFeeWorker();
      await worker.runOnce();
      await env.mine(3);
      await worker.runOnce();
      const final = await env.operation(op.operationId);
      expect(final.state).toBe('CONFIRMED');
      expect(await minedNonce()).toBe(nonceBefore + 1);
      expect(await env.balanceOf(op.destination ?? '')).toBe(amount);
    });

    it('I12-BUMP a worker killed (SIGKILL) after recording a replacement, before broadcasting it: the recorded bytes are sent', async () => {
      const amount = ETH / 50n;
      const { op, nonceBefore } = await stuckWithdrawal(amount);
      await killWorkerAt('replacement-recorded', op.operationId);
      const recorded = await attemptsOf(op);
      expect(recorded.map((a) => a.kind)).toEqual(['original', 'replacement']);
      expect(await poolHashes()).toEqual([]);
      // The watch step finds nothing of ours on the node and sends the newest recorded bytes; no new
      // signature is needed (the policy would not bump again for an hour).
      await lowFeeWorker({ bumpAfterMs: 60 * 60_000, maxBumps: 3 }).runOnce();
      expect(await poolHashes()).toEqual([recorded[1]?.txHash.toLowerCase()]);
      await env.mine(3);
      await lowFeeWorker({ bumpAfterMs: 60 * 60_000, maxBumps: 3 }).runOnce();
      const final = await env.operation(op.operationId);
      expect(final.state).toBe('CONFIRMED');
      expect((await attemptsOf(op)).length).toBe(2);
      expect(await minedNonce()).toBe(nonceBefore + 1);
      expect(await env.balanceOf(op.destination ?? '')).toBe(amount);
    });

    it('I12-GAP a dropped transaction blocks every later nonce; the nonce view shows it and a staff bump closes it', async () => {
      const { op: first, nonceBefore } = await stuckWithdrawal(ETH / 60n);
      // A later withdrawal, signed at a fee the chain takes, waits behind the dropped nonce.
      const second = await env.withdraw(ETH / 70n);
      await env.worker().runOnce();
      await env.mine(2);
      const waiting = await env.operation(second.operationId);
      expect(waiting.state).toBe('BROADCAST');
      expect(waiting.chainNonce).toBe((first.chainNonce ?? 0) + 1);
      expect(await minedNonce()).toBe(nonceBefore);

      const view = await nonceView();
      expect(view.chainLatest).toBe(nonceBefore);
      expect(view.blocking).toEqual({
        nonce: first.chainNonce,
        operationId: first.operationId,
        state: 'BROADCAST',
      });
      expect(view.operations.map((o) => o.operationId)).toEqual([first.operationId, second.operationId]);
      expect(view.missing).toEqual([]);

      // A staff member asks for a bump (operate permission, within the cap); the worker signs it.
      await withTenant(env.t.db, env.tenantId, (tx) =>
        requestFeeBump(tx, {
          tenantId: env.tenantId,
          operationId: first.operationId,
          actor: 'staff:carol',
          reason: 'nonce gap blocks the queue',
        }),
      );
      const worker = lowFeeWorker({ bumpAfterMs: 60 * 60_000, maxBumps: 3 });
      await worker.runOnce();
      expect((await attemptsOf(first)).map((a) => [a.kind, a.requestedBy])).toEqual([
        ['original', null],
        ['replacement', 'staff:carol'],
      ]);
      await env.mine(3);
      await worker.runOnce();
      expect((await env.operation(first.operationId)).state).toBe('CONFIRMED');
      expect((await env.operation(second.operationId)).state).toBe('CONFIRMED');
      expect(await minedNonce()).toBe(nonceBefore + 2);
      expect((await nonceView()).blocking).toBeNull();
    });
  },
);

/** The nonce view of the test wallet, with the chain's counts read by the rail. */
async function nonceView() {
  const rail = createEvmRail({
    rpcUrl: env.rpcUrl,
    chainId: CHAIN_ID,
    privateKey: anvilDevPrivateKeys[1] as Hex,
  });
  const counts = await rail.readNonces(env.hotWallet);
  const views = await withTenant(env.t.db, env.tenantId, (tx) =>
    walletNonceView(tx, env.tenantId, { ethereum: counts }),
  );
  const view = views[0];
  if (!view) throw new Error('no wallet view');
  return view;
}

async function held(): Promise<bigint> {
  const rows = await withTenant(env.t.db, env.tenantId, (tx) => getBalances(tx, env.tenantId, 'acct-1'));
  return BigInt(rows.find((b) => b.asset === 'ETH')?.held ?? 0);
}

/** staff:alice proposes the cancel, an approver (a real, active member) approves it (four eyes). */
async function approveCancel(op: Operation): Promise<void> {
  const bob = await staffMember(env.t.db, env.tenantId, 'approver');
  await withTenant(env.t.db, env.tenantId, async (tx) => {
    const { proposal } = await propose(tx, {
      tenantId: env.tenantId,
      actor: 'staff:alice',
      request: {
        kind: 'cancel_withdrawal',
        idempotencyKey: `cancel-${op.operationId}`,
        payload: { operationId: op.operationId, reason: 'customer asked to stop it' },
      },
    });
    const decided = await decideProposal(tx, {
      tenantId: env.tenantId,
      proposalId: proposal.proposalId,
      staffId: bob,
      payloadHash: proposal.payloadHash,
      decision: 'approve',
    });
    expect(decided.proposal.state).toBe('EXECUTED');
  });
}

/** Our transactions in the node's pool (hashes, lower case). */
async function poolHashes(): Promise<string[]> {
  const content = (await rpc(env.anvil.rpcUrl, 'txpool_content')) as {
    pending: Record<string, Record<string, { hash: string }>>;
  };
  const ours = Object.entries(content.pending).find(
    ([from]) => from.toLowerCase() === env.hotWallet.toLowerCase(),
  );
  return Object.values(ours?.[1] ?? {}).map((tx) => tx.hash.toLowerCase());
}

/** A real worker process (low fees, bump at once) stopped at `step`, then killed with SIGKILL. */
async function killWorkerAt(
  step: 'replacement-signed' | 'replacement-recorded',
  operationId: string,
): Promise<void> {
  await killWorker({
    databaseUrl: env.t.url ?? '',
    rpcUrl: env.rpcUrl,
    chainId: CHAIN_ID,
    step,
    leaseMs: LEASE_MS,
    extra: {
      fees: { maxFeePerGasWei: (2n * GWEI).toString(), maxPriorityFeePerGasWei: GWEI.toString() },
      replacePolicies: { ethereum: { bumpAfterMs: 0, maxBumps: 3 } },
    },
  });
  // Its lease (if it recorded one) lapses before anyone else may replace: moved back on the
  // database's clock rather than waited for.
  await expireLease(env.t.db, operationId);
}
