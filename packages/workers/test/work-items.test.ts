import { randomUUID } from 'node:crypto';
import { enqueue, rowsOf, transition, withTenant } from '@idem/core';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Environment, ETH, startEnvironment } from './environment.ts';

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
