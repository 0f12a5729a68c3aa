import { IdemError } from '@idem/contracts';
import { and, eq, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { operations } from '../db/schema/index.ts';
import type { Operation } from '../operations/operation-record.ts';
import { recordTransition } from './transition.ts';

/**
 * Names who is accountable for an operation that needs a person (an UNKNOWN past its window, a
 * FAILED_TERMINAL), without changing its state (C15). Conditional on the version read; the history
 * records who assigned it and why.
 */
export async function assignOwner(
  tx: Tx,
  op: Operation,
  input: { owner: string; actor: string; reason: string; evidence?: Record<string, unknown> },
): Promise<Operation> {
  const updated = await tx
    .update(operations)
    .set({ owner: input.owner, version: sql`${operations.version} + 1`, updatedAt: sql`now()` })
    .where(
      and(
        eq(operations.tenantId, op.tenantId),
        eq(operations.operationId, op.operationId),
        eq(operations.state, op.state),
        eq(operations.version, op.version),
      ),
    )
    .returning();
  const next = updated[0] as Operation | undefined;
  if (!next) throw new IdemError('STALE_WRITE', 'operation changed since it was read; owner not assigned');
  await recordTransition(tx, next, op.state, {
    actor: input.actor,
    reason: `owner ${input.owner}: ${input.reason}`,
    evidence: input.evidence,
  });
  return next;
}
