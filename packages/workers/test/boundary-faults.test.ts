import { getBalances, rowsOf, withTenant } from '@idem/core';
import { anvilDevPrivateKeys } from '@idem/rails';
import { type FaultProxy, startFaultProxy } from '@idem/rails/testing';
import { sql } from 'drizzle-orm';
import { createWalletClient, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Environment, ETH, rpc, startEnvironment } from './environment.ts';

let env: Environment;
let proxy: FaultProxy;

beforeAll(async () => {
  env = await startEnvironment({
    rpcUrl: async (anvilUrl) => {
      proxy = await startFaultProxy(anvilUrl);
      return proxy.url;
    },
  });
});
afterAll(async () => {
  await proxy.close();
  await env.close();
});

async function heldEth(): Promise<bigint> {
  const balances = await withTenant(env.t.db, env.tenantId, (tx) => getBalances(tx, env.tenantId, 'acct-1'));
  return BigInt(balances.find((b) => b.asset === 'ETH')?.held ?? 0);
}

/** The held balance equals exactly the withdrawals that still hold funds. */
async function expectHoldsCovered(): Promise<void> {
  const rows = rowsOf<{ total: string }>(
    await env.t.db.execute(sql`
      select coalesce(sum(amount_minor), 0)::text as total from operations
       where tenant_id = ${env.tenantId} and kind = 'withdrawal' and asset_code = 'ETH'
         and state in ('REQUESTED','APPROVED','SIGNING','SIGNED','BROADCAST','UNKNOWN','FAILED_TERMINAL')`),
  );
  expect(await heldEth()).toBe(BigInt(rows[0]?.total ?? '0'));
}

describe('ambiguous sends and reconciliation on a real chain', () => {
  it('C13 a response dropped after the node received the transaction ends UNKNOWN, then one transfer', async () => {
    const op = await env.withdraw(ETH / 10n);
    const worker = env.worker();
    proxy.fault = 'forward-then-502';
    await worker.runOnce();
    proxy.fault = 'none';
    const unknown = await env.operation(op.operationId);
    expect(unknown.state).toBe('UNKNOWN');
    await expectHoldsCovered();
    // The node did receive it: the reconciler finds it by hash and follows the evidence.
    await env.mine(2);
    await worker.runOnce();
    expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
    expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 10n);
  });

  it('C14 the reconciler queries the chain before resending, and resends only the stored bytes', async () => {
    const op = await env.withdraw(ETH / 20n);
    const worker = env.worker();
    // The proxy forwards the send and then hangs; the transaction is then dropped from the node's
    // pool, so the chain has no trace of it when the reconciler asks.
    proxy.fault = 'forward-then-hang';
    await rpc(env.anvil.rpcUrl, 'evm_setAutomine', [false]);
    await worker.runOnce();
    proxy.fault = 'none';
    const unknown = await env.operation(op.operationId);
    expect(unknown.state).toBe('UNKNOWN');
    await rpc(env.anvil.rpcUrl, 'anvil_dropTransaction', [unknown.txHash]);
    await rpc(env.anvil.rpcUrl, 'evm_setAutomine', [true]);
    const requestsBefore = proxy.forwarded;
    await worker.runOnce(); // lookup (absent, nonce free) -> resend the same bytes -> BROADCAST
    expect(proxy.forwarded).toBeGreaterThan(requestsBefore + 1); // queries, then the send
    const after = await env.operation(op.operationId);
    expect(after.state).toBe('BROADCAST');
    expect(after.txHash).toBe(unknown.txHash);
    expect(after.signedArtifact).toBe(unknown.signedArtifact);
    const receipt = await env.chain.getTransactionReceipt({ hash: unknown.txHash as Hex });
    expect(receipt.status).toBe('success');
    expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 20n);
  });

  it('C14 a nonce consumed by another transaction is evidence of no transfer: VERIFIED_NOT_SENT, hold released', async () => {
    const op = await env.withdraw(ETH / 30n);
    const worker = env.worker();
    await rpc(env.anvil.rpcUrl, 'evm_setAutomine', [false]);
    proxy.fault = 'forward-then-hang';
    await worker.runOnce();
    proxy.fault = 'none';
    const unknown = await env.operation(op.operationId);
    expect(unknown.state).toBe('UNKNOWN');
    await rpc(env.anvil.rpcUrl, 'anvil_dropTransaction', [unknown.txHash]);
    // Someone else with the hot wallet's key uses the same nonce (a manual sweep, say).
    const wallet = createWalletClient({
      account: privateKeyToAccount(anvilDevPrivateKeys[1] as Hex),
      transport: http(env.anvil.rpcUrl),
    });
    await wallet.sendTransaction({
      chain: null,
      to: env.hotWallet,
      value: 1n,
      nonce: unknown.chainNonce ?? 0,
    });
    await rpc(env.anvil.rpcUrl, 'evm_setAutomine', [true]);
    await env.mine(1);
    await worker.runOnce();
    expect((await env.operation(op.operationId)).state).toBe('VERIFIED_NOT_SENT');
    await expectHoldsCovered();
    expect(await env.balanceOf(op.destination ?? '')).toBe(0n);
  });

  it('C17 a reorganisation that removes a confirmed withdrawal returns it to BROADCAST, then it confirms again', async () => {
    const op = await env.withdraw(ETH / 40n);
    const worker = env.worker();
    await worker.runOnce();
    await env.mine(1);
    await worker.runOnce();
    expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
    // Replace the last 3 blocks with empty ones: our transaction returns to the pool or vanishes.
    await rpc(env.anvil.rpcUrl, 'anvil_reorg', [3, []]);
    await worker.runOnce();
    const reorged = await env.operation(op.operationId);
    expect(reorged.state).toBe('BROADCAST');
    expect(await heldEth()).toBeGreaterThanOrEqual(ETH / 40n);
    // The stored bytes are still valid: watching resends them if the node forgot them, then it confirms.
    await worker.runOnce();
    await env.mine(2);
    await worker.runOnce();
    expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
    expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 40n);
  });

  it('C02 a payload changed in the database after approval is refused before signing; nothing is sent', async () => {
    const op = await env.withdraw(ETH / 50n);
    const worker = env.worker({ batchSize: 1 });
    // Tampering with table-owner rights, bypassing the guard trigger, before the worker sees it.
    await env.t.db.transaction(async (tx) => {
      await tx.execute(sql`set local session_replication_role = replica`);
      await tx.execute(
        sql`update operations set amount_minor = amount_minor * 10 where operation_id = ${op.operationId}`,
      );
    });
    await worker.runOnce();
    const refused = await env.operation(op.operationId);
    expect(refused.state).toBe('FAILED_TERMINAL');
    expect(refused.signedArtifact).toBeNull();
    expect(refused.owner).toBe('ops-oncall');
    expect(await env.balanceOf(op.destination ?? '')).toBe(0n);
    expect(env.logLines.some((line) => line.includes('payload mismatch'))).toBe(true);
  });
});
