import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { enqueue, rowsOf, transition, withTenant } from '@idem/core';
import { sql } from 'drizzle-orm';
import { createPublicClient, http } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerContext } from '../src/context.ts';
import { RailRegistry } from '../src/rails.ts';
import { processWorkItems } from '../src/work-items.ts';
import { CHAIN_ID, type Environment, ETH, startEnvironment } from './environment.ts';

let env: Environment;
beforeAll(async () => {
  env = await startEnvironment();
});
afterAll(() => env.close());

async function item(workId: string) {
  const rows = rowsOf<{ status: string; attempts: number; last_error: string | null }>(
    await env.t.db.execute(
      sql`select status, attempts, last_error from work_items where work_id = ${workId}`,
    ),
  );
  return rows[0];
}

describe('a work item that keeps failing', () => {
  it('never blocks the items behind it, and is dead-lettered with an alert after its last attempt', async () => {
    // A review item for an operation that does not exist: processing it fails every time.
    const poison = await withTenant(env.t.db, env.tenantId, (tx) =>
      enqueue(tx, {
        tenantId: env.tenantId,
        topic: 'withdrawal.review',
        operationId: randomUUID(),
        payload: {},
      }),
    );
    const op = await env.withdraw(ETH / 500n);
    const worker = env.worker();
    await worker.runOnce();
    expect((await env.operation(op.operationId)).state).not.toBe('REQUESTED');
    expect(await item(poison)).toMatchObject({ status: 'pending', attempts: 1 });
    expect((await item(poison))?.last_error).toMatch(/not found/);

    await env.t.db.execute(
      sql`update work_items set attempts = 9, available_at = now() where work_id = ${poison}`,
    );
    await worker.runOnce();
    expect(await item(poison)).toMatchObject({ status: 'dead', attempts: 10 });
    expect(env.logLines.some((line) => line.includes('dead-lettered after repeated failures'))).toBe(true);
  });
});

describe('idempotency retention run by the worker', () => {
  it('C07 expires the keys of withdrawals settled beyond the horizon and keeps every other key', async () => {
    const settled = await env.withdraw(ETH / 600n);
    const pending = await env.withdraw(ETH / 601n);
    // Settled within the horizon: a late retry must still replay, so its key stays.
    const recent = await env.withdraw(ETH / 602n);
    await withTenant(env.t.db, env.tenantId, async (tx) => {
      await transition(tx, settled, 'REJECTED', { actor: 'staff:x', reason: 'test' });
      await transition(tx, recent, 'REJECTED', { actor: 'staff:x', reason: 'test' });
    });
    await env.t.db.execute(
      sql`update operations set settled_at = now() - interval '100 days', version = version + 1 where operation_id = ${settled.operationId}`,
    );
    await env.worker({ expireKeysEveryMs: 0 }).runOnce();
    expect((await env.operation(settled.operationId)).idempotencyKey).toMatch(/^expired:[0-9a-f]{64}$/);
    expect((await env.operation(pending.operationId)).idempotencyKey).toBe(pending.idempotencyKey);
    expect((await env.operation(recent.operationId)).idempotencyKey).toBe(recent.idempotencyKey);
  });
});

describe('I11-F9 what a worker stores and logs about a failure is scrubbed', () => {
  const apiKeyInPath = 'SECRETKEY123';
  let provider: Server;
  let providerUrl: string;
  beforeAll(async () => {
    // A node provider that refuses every call, reached at a URL whose path is the account's key.
    provider = createServer(async (req, res) => {
      let body = '';
      for await (const chunk of req) body += chunk;
      // The chain id (I32-CHAIN) and fees (I12-FEES) are read before signing: those calls are
      // answered, so the send is what fails.
      if (body.includes('"eth_chainId"')) {
        const { id } = JSON.parse(body) as { id: number };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id, result: `0x${CHAIN_ID.toString(16)}` }));
        return;
      }
      if (body.includes('"eth_feeHistory"')) {
        const { id } = JSON.parse(body) as { id: number };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id,
            result: {
              oldestBlock: '0x1',
              baseFeePerGas: ['0x3b9aca00', '0x3b9aca00'],
              gasUsedRatio: [0],
              reward: [['0x0']],
            },
          }),
        );
        return;
      }
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":"upstream unavailable"}');
    });
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v2/${apiKeyInPath}`;
  });
  afterAll(() => new Promise<void>((resolve) => provider.close(() => resolve())));

  it('I11-F9 a step failing on an RPC URL with a key path and on a query with parameters: last_error and logs carry neither', async () => {
    const sqlParameter = `customer-secret-${randomUUID()}`;
    const logStart = env.logLines.length;

    // A whole worker pass whose node answers errors: the send fails (UNKNOWN, with the failure as
    // evidence in the operation's history) and the reconciler, asking the node, logs its failure.
    const op = await env.withdraw(ETH / 700n);
    await env
      .worker({ rails: { evm: { rpcUrl: providerUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000 } } })
      .runOnce();
    expect((await env.operation(op.operationId)).state).toBe('UNKNOWN');
    const history = rowsOf<{ evidence: unknown }>(
      await env.t.db.execute(
        sql`select evidence from operation_transitions where operation_id = ${op.operationId} and to_state = 'UNKNOWN'`,
      ),
    );
    const evidence = JSON.stringify(history.map((row) => row.evidence));
    expect(evidence).toContain('"rail":"evm"');

    // Two work items whose handling fails: one on the provider, one on a query with a parameter.
    const ctx: WorkerContext = {
      db: env.t.db,
      rails: new RailRegistry({ evm: { rpcUrl: providerUrl, chainId: CHAIN_ID } }),
      log: env.log,
      workerId: 'worker-scrub',
      leaseMs: 5_000,
      batchSize: 10,
      reorgWindowSeconds: 3_600,
      unknownEscalateAfterMs: 60_000,
      notSentConfirmIntervalMs: 60_000,
      escalationOwner: 'ops',
      now: Date.now,
    };
    const [viaProvider, viaQuery] = await withTenant(env.t.db, env.tenantId, async (tx) => [
      await enqueue(tx, { tenantId: env.tenantId, topic: 'inbox.event', payload: { fails: 'provider' } }),
      await enqueue(tx, { tenantId: env.tenantId, topic: 'inbox.event', payload: { fails: 'query' } }),
    ]);
    const node = createPublicClient({ transport: http(providerUrl, { retryCount: 0 }) });
    const handled = await processWorkItems(ctx, env.tenantId, 'inbox.event', async (tx, item) => {
      if ((item.payload as { fails: string }).fails === 'provider') await node.getBlockNumber();
      else await tx.execute(sql`select ${sqlParameter}::uuid`);
    });
    expect(handled).toBe(2);

    const stored = [await item(viaProvider ?? ''), await item(viaQuery ?? '')];
    const logs = env.logLines.slice(logStart).join('');
    // The failures were recorded and logged (so their absence below means something)...
    for (const row of stored) expect(row).toMatchObject({ status: 'pending', attempts: 1 });
    expect(stored[0]?.last_error).toMatch(/HTTP request failed/);
    expect(stored[0]?.last_error).toContain('http://127.0.0.1:');
    expect(stored[1]?.last_error).toMatch(/select \$1::uuid/);
    expect(logs).toContain('rail could not be asked');
    expect(logs).toContain('work item failed; retrying later');
    // ...and neither the key in the provider's path nor the query's parameter is in any of them.
    for (const text of [stored[0]?.last_error ?? '', stored[1]?.last_error ?? '', logs, evidence]) {
      expect(text).not.toContain(apiKeyInPath);
      expect(text).not.toContain(sqlParameter);
    }
  });
});
