import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getBalances, reviewWithdrawal, rowsOf, withTenant } from '@idem/core';
import { anvilDevPrivateKeys } from '@idem/rails';
import { type FaultProxy, startFaultProxy } from '@idem/testing/chain';
import { sql } from 'drizzle-orm';
import { createWalletClient, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Environment, ETH, rpc, startEnvironment } from './environment.ts';

let env: Environment;
let proxy: FaultProxy;
let recorder: { url: string; calls: RpcCall[]; close(): Promise<void> };

interface RpcCall {
  method: string;
  params: unknown[];
}

/** Sits between the fault proxy and the node and records, in order, every call the node received. */
async function startRecorder(upstreamUrl: string): Promise<typeof recorder> {
  const calls: RpcCall[] = [];
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const parsed = JSON.parse(body) as RpcCall | RpcCall[];
    for (const call of Array.isArray(parsed) ? parsed : [parsed]) {
      calls.push({ method: call.method, params: call.params ?? [] });
    }
    const upstream = await fetch(upstreamUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    response.writeHead(upstream.status, { 'content-type': 'application/json' }).end(await upstream.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

beforeAll(async () => {
  env = await startEnvironment({
    rpcUrl: async (anvilUrl) => {
      recorder = await startRecorder(anvilUrl);
      proxy = await startFaultProxy(recorder.url);
      // The node's chain id (I32-CHAIN) and fees (I12-FEES) are read before signing: the faults start with the send.
      proxy.spareMethods = ['eth_chainId', 'eth_feeHistory'];
      return proxy.url;
    },
  });
});
afterAll(async () => {
  await proxy.close();
  await recorder.close();
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
    const mark = recorder.calls.length;
    await worker.runOnce(); // lookup (absent, nonce free) -> resend the same bytes -> BROADCAST
    // What the node received, in order: our transaction by hash and the wallet's nonce, then the send.
    const calls = recorder.calls.slice(mark);
    const same = (value: unknown, expected: string | null) =>
      typeof value === 'string' && value.toLowerCase() === expected?.toLowerCase();
    const byHash = calls.findIndex(
      (c) =>
        ['eth_getTransactionReceipt', 'eth_getTransactionByHash'].includes(c.method) &&
        same(c.params[0], unknown.txHash),
    );
    const byNonce = calls.findIndex(
      (c) => c.method === 'eth_getTransactionCount' && same(c.params[0], env.hotWallet),
    );
    const sends = calls.flatMap((c, i) =>
      c.method === 'eth_sendRawTransaction' && same(c.params[0], unknown.signedArtifact) ? [i] : [],
    );
    expect(sends).toHaveLength(1);
    expect(byHash).toBeGreaterThanOrEqual(0);
    expect(byHash).toBeLessThan(sends[0] ?? -1);
    expect(byNonce).toBeGreaterThanOrEqual(0);
    expect(byNonce).toBeLessThan(sends[0] ?? -1);
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
    // Deep enough to be final (I32-FINAL; anvil finalizes 64 blocks behind its head).
    await env.mine(65);
    // Proven at a pinned block on two passes; no interval between them here.
    const reconciler = env.worker({ notSentConfirmIntervalMs: 0 });
    await reconciler.runOnce();
    expect((await env.operation(op.operationId)).state).toBe('UNKNOWN');
    await reconciler.runOnce();
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
    // The hold is back: exactly the withdrawals that still hold funds, this one included.
    await expectHoldsCovered();
    // The stored bytes are still valid: watching resends them if the node forgot them, then it confirms.
    await worker.runOnce();
    await env.mine(2);
    await worker.runOnce();
    expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
    expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 40n);
  });

  it('C02 a payload changed in the database after approval is refused before signing; nothing is sent', async () => {
    const requested = await env.withdraw(ETH / 50n);
    // Approved first (the review, within the auto-approve limit): the database approves only the
    // payload its hold was placed for (I32-DB), so the tampering comes after, as the name says.
    const op = await withTenant(env.t.db, env.tenantId, (tx) => reviewWithdrawal(tx, requested));
    expect(op.state).toBe('APPROVED');
    const worker = env.worker({ batchSize: 1 });
    // Tampering with table-owner rights, bypassing the guard trigger, before the worker signs it.
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
