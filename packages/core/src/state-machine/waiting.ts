import { IdemError } from '@idem/contracts';
import { and, eq, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { operations } from '../db/schema/index.ts';
import type { Operation } from '../operations/operation-record.ts';
import { recordTransition } from './transition.ts';

/**
 * Records why an APPROVED withdrawal is not being signed (its fee cap cannot pay the network fee
 * now): visible to staff and the tenant, with a history row carrying the numbers. Only a change of
 * reason is written, so a withdrawal that waits for many passes gets one row, not one per pass.
 * Nothing is leased, signed or allocated: the next pass looks again.
 */
export async function markWaiting(
  tx: Tx,
  op: Operation,
  input: { reason: string; actor: string; evidence?: Record<string, unknown> },
): Promise<Operation> {
  if (op.state !== 'APPROVED')
    throw new Error(`only an APPROVED withdrawal waits; ${op.operationId} is ${op.state}`);
  if (op.waitingReason === input.reason) return op;
  return setWaiting(tx, op, input.reason, { ...input, reason: `waiting: ${input.reason}` });
}

/** The wait is over (fees fell within the cap): cleared in the transaction that goes on to sign. */
export async function clearWaiting(
  tx: Tx,
  op: Operation,
  input: { actor: string; reason: string },
): Promise<Operation> {
  if (op.waitingReason === null) return op;
  return setWaiting(tx, op, null, input);
}

async function setWaiting(
  tx: Tx,
  op: Operation,
  waitingReason: string | null,
  history: { actor: string; reason: string; evidence?: Record<string, unknown> },
): Promise<Operation> {
  const updated = await tx
    .update(operations)
    .set({ waitingReason, version: sql`${operations.version} + 1`, updatedAt: sql`now()` })
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
  if (!next)
    throw new IdemError('STALE_WRITE', 'operation changed since it was read; waiting reason not recorded');
  await recordTransition(tx, next, op.state, { ...history, notify: false });
  return next;
}
