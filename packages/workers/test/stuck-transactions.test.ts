import { createServer } from 'node:net';
import { getOperation, operationStats, schema, transition, withTenant } from '@idem/core';
import { ageOperations } from '@idem/testing/database';
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, ETH, startEnvironment, testClock } from './environment.ts';

/**
 * Stuck transactions: anvil with automine off, so a broadcast transaction waits in the
 * pool until the test mines a block, and a node that cannot be reached at all (a closed port).
 */
let env: Environment;
let closedPortUrl: string;

beforeAll(async () => {
  env = await startEnvironment({ mining: 'manual' });
  // A port that was open a moment ago and is closed now: every call is refused.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  closedPortUrl = `http://127.0.0.1:${port}`;
});
afterAll(() => env.close());

async function history(operationId: string) {
  return withTenant(env.t.db, env.tenantId, (tx) =>
    tx
      .select()
      .from(schema.operationTransitions)
      .where(eq(schema.operationTransitions.operationId, operationId))
      .orderBy(schema.operationTransitions.seq),
  );
}

const alerts = (operationId: string, text: string) =>
  env.logLines.filter(
    (line) => line.includes(operationId) && line.includes('"alert":true') && line.includes(text),
  );

/** Broadcast with anvil not mining: the transaction sits in the pool. */
async function broadcastUnmined(worker: ReturnType<Environment['worker']>) {
  const op = await env.withdraw(ETH / 50n);
  await worker.runOnce();
  const broadcast = await env.operation(op.operationId);
  expect(broadcast.state).toBe('BROADCAST');
  return broadcast;
}

describe('I12-STUCK a BROADCAST transaction that is not mined', () => {
  it('I12-STUCK past the alert age: alert fired and the age in the metric; past the second age: escalated to a named owner; then mined once', async () => {
    const clock = testClock();
    const worker = env.worker({
      escalationOwner: 'treasury-oncall',
      broadcastAlertAfterMs: { ethereum: 60_000 },
      broadcastEscalateAfterMs: { ethereum: 120_000 },
      now: clock.now,
    });
    const op = await broadcastUnmined(worker);

    // Before the first age: nothing.
    await worker.runOnce();
    expect(alerts(op.operationId, 'not mined')).toHaveLength(0);

    clock.advance(61_000);
    await worker.runOnce();
    expect(alerts(op.operationId, 'not mined')).toHaveLength(1);
    expect((await env.operation(op.operationId)).owner).toBeNull();
    // The alert is raised once per worker, not on every pass.
    await worker.runOnce();
    expect(alerts(op.operationId, 'not mined')).toHaveLength(1);
    // The metric is the database's own age of the row: moved back on its clock rather than waited for.
    await ageOperations(env.t.db, sql`operation_id = ${op.operationId}::uuid`, 1.6);
    const stats = await operationStats(env.t.db);
    const broadcast = stats.find((row) => row.state === 'BROADCAST');
    expect(broadcast?.oldestSeconds).toBeGreaterThanOrEqual(1.5);

    clock.advance(60_000);
    await worker.runOnce();
    const escalated = await env.operation(op.operationId);
    expect([escalated.state, escalated.owner]).toEqual(['BROADCAST', 'treasury-oncall']);
    expect(alerts(op.operationId, 'escalated')).toHaveLength(1);
    const last = (await history(op.operationId)).at(-1);
    expect([last?.fromState, last?.toState]).toEqual(['BROADCAST', 'BROADCAST']);
    expect(last?.reason).toMatch(/owner treasury-oncall: .*not mined/);
    // Escalated once: later passes change nothing.
    await worker.runOnce();
    expect((await env.operation(op.operationId)).version).toBe(escalated.version);

    // The same transaction is mined when blocks come: one transfer, confirmed.
    await env.mine(3);
    await worker.runOnce();
    expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
    expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 50n);
  });

  it('I12-STUCK a BROADCAST whose node cannot be reached is still escalated after the second age', async () => {
    const op = await broadcastUnmined(env.worker());
    const clock = testClock();
    const unreachable = env.worker({
      rails: { evm: { rpcUrl: closedPortUrl, chainId: CHAIN_ID, requestTimeoutMs: 500 } },
      escalationOwner: 'treasury-oncall',
      broadcastAlertAfterMs: { ethereum: 60_000 },
      broadcastEscalateAfterMs: { ethereum: 120_000 },
      now: clock.now,
    });
    clock.advance(121_000);
    await unreachable.runOnce();
    expect((await env.operation(op.operationId)).owner).toBe('treasury-oncall');
    await env.mine(3);
    await env.worker().runOnce();
    expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
  });
});

describe('I12-STUCK an UNKNOWN withdrawal whose rail cannot be asked', () => {
  it('I12-STUCK is escalated to a named owner after IDEM_UNKNOWN_ESCALATE_AFTER_MS although every lookup fails', async () => {
    const sent = await broadcastUnmined(env.worker());
    // The send's answer was lost: UNKNOWN, funds held.
    const unknown = await withTenant(env.t.db, env.tenantId, async (tx) =>
      transition(tx, await getOperation(tx, env.tenantId, sent.operationId), 'UNKNOWN', {
        actor: 'test',
        reason: 'broadcast answer lost',
      }),
    );
    const clock = testClock();
    const unreachable = env.worker({
      rails: { evm: { rpcUrl: closedPortUrl, chainId: CHAIN_ID, requestTimeoutMs: 500 } },
      escalationOwner: 'unknown-oncall',
      unknownEscalateAfterMs: 60_000,
      now: clock.now,
    });
    await unreachable.runOnce();
    expect((await env.operation(unknown.operationId)).owner).toBeNull();
    clock.advance(61_000);
    await unreachable.runOnce();
    const escalated = await env.operation(unknown.operationId);
    expect([escalated.state, escalated.owner]).toEqual(['UNKNOWN', 'unknown-oncall']);
    expect(alerts(unknown.operationId, 'UNKNOWN withdrawal escalated')).toHaveLength(1);
    const last = (await history(unknown.operationId)).at(-1);
    expect(last?.evidence).toMatchObject({ rail: 'no answer' });
    // Once the node answers again, the evidence decides as usual.
    await env.mine(3);
    await env.worker().runOnce();
    expect((await env.operation(unknown.operationId)).state).toBe('CONFIRMED');
  });
});
