import { rowsOf } from '@idem/core';
import { type AnvilInstance, startAnvil } from '@idem/rails';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Environment, ETH, startEnvironment } from './environment.ts';

/**
 * The in-process key guard decides by chain id. The id it trusts is the one the node reports,
 * never only the configured one (which defaults to anvil's): a worker configured for the local
 * development chain but connected to a node of another chain signs nothing with an in-process key.
 */
let env: Environment;
/** A node that reports chain 1, as a production node would. */
let otherChain: AnvilInstance;

beforeAll(async () => {
  env = await startEnvironment();
  otherChain = await startAnvil({ chainId: 1 });
});
afterAll(async () => {
  await otherChain.stop();
  await env.close();
});

async function signedAttempts(operationId: string): Promise<number> {
  const rows = rowsOf<{ n: number }>(
    await env.t.db.execute(
      sql`select count(*)::int as n from signed_attempts where operation_id = ${operationId}`,
    ),
  );
  return rows[0]?.n ?? 0;
}

describe('I32-CHAIN the worker trusts the chain id its node reports', () => {
  it('I32-CHAIN configured for the development chain, connected to a node of chain 1: nothing is signed with an in-process key, and an alert names the mismatch', async () => {
    const op = await env.withdraw(1n * ETH);
    const worker = env.worker({
      rails: { evm: { rpcUrl: otherChain.rpcUrl, chainId: 31337, requestTimeoutMs: 2_000 } },
    });
    await worker.runOnce();
    expect(await signedAttempts(op.operationId)).toBe(0);
    expect((await env.operation(op.operationId)).state).toBe('APPROVED');
    expect(env.logLines.some((line) => line.includes('reports chain 1'))).toBe(true);
  });

  it('I32-CHAIN connected to the node of the configured development chain, the same worker signs and sends', async () => {
    const op = await env.withdraw(1n * ETH);
    await env.worker().runOnce();
    expect(await signedAttempts(op.operationId)).toBe(1);
  });
});
