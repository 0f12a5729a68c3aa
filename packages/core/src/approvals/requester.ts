import { and, eq, sql } from 'drizzle-orm';
import { apiKeyOwners, keyIdOfActor } from '../access/api-keys.ts';
import type { Tx } from '../db/connect.ts';
import { operations, operationTransitions } from '../db/schema/index.ts';
import type { Operation } from '../operations/operation-record.ts';
import { recordTransition } from '../state-machine/transition.ts';

/** Who asked for the withdrawal: the actor of its first history row. */
export async function requesterOf(tx: Tx, op: Operation): Promise<string> {
  const rows = await tx
    .select({ actor: operationTransitions.actor })
    .from(operationTransitions)
    .where(
      and(
        eq(operationTransitions.tenantId, op.tenantId),
        eq(operationTransitions.operationId, op.operationId),
        sql`${operationTransitions.fromState} is null`,
      ),
    );
  return rows[0]?.actor ?? 'unknown';
}

/**
 * The staff who answer for a requester that is not a person: for an API key, whoever minted it
 * and whoever last widened its scopes. Empty for every other requester.
 */
export async function answerableFor(tx: Tx, op: Operation, requester: string): Promise<string[]> {
  const keyId = keyIdOfActor(requester);
  return keyId === null ? [] : apiKeyOwners(tx, op.tenantId, keyId);
}

/** The account holder's request a staff member says they act on (a ticket, a call reference). */
export interface OnBehalfOf {
  customerRequestRef: string;
}

/**
 * A withdrawal a staff member asked for (I11-F3). Whether it is staff-initiated comes from the
 * requester itself, so no caller can forget to say it; only the "on behalf of the holder" claim,
 * which lowers the approvals needed from two to one, is read from the requester's own history row.
 */
export async function staffInitiationOf(
  tx: Tx,
  op: Operation,
): Promise<{ requester: string; onBehalfOf: OnBehalfOf | null } | null> {
  const requester = await requesterOf(tx, op);
  if (!requester.startsWith('staff:')) return null;
  const rows = await tx
    .select({ evidence: operationTransitions.evidence })
    .from(operationTransitions)
    .where(
      and(
        eq(operationTransitions.tenantId, op.tenantId),
        eq(operationTransitions.operationId, op.operationId),
        eq(operationTransitions.actor, requester),
        sql`${operationTransitions.evidence} -> 'staffInitiated' is not null`,
      ),
    );
  const recorded = (rows[0]?.evidence as { staffInitiated?: { onBehalfOf?: OnBehalfOf | null } } | undefined)
    ?.staffInitiated?.onBehalfOf;
  return { requester, onBehalfOf: recorded?.customerRequestRef ? recorded : null };
}

/**
 * Records, in the history of a withdrawal a staff member just created, whether they act at the
 * account holder's request and which request. Written before the risk review reads it.
 */
export async function recordStaffInitiation(
  tx: Tx,
  op: Operation,
  input: { actor: string; onBehalfOf: OnBehalfOf | null },
): Promise<Operation> {
  const updated = await tx
    .update(operations)
    .set({ version: sql`${operations.version} + 1`, updatedAt: sql`now()` })
    .where(
      and(
        eq(operations.tenantId, op.tenantId),
        eq(operations.operationId, op.operationId),
        eq(operations.state, 'REQUESTED'),
        eq(operations.version, op.version),
      ),
    )
    .returning();
  const next = updated[0] as Operation | undefined;
  if (!next) throw new Error(`withdrawal ${op.operationId} changed before its staff initiation was recorded`);
  await recordTransition(tx, next, 'REQUESTED', {
    actor: input.actor,
    reason: input.onBehalfOf
      ? `staff-initiated at the account holder's request (${input.onBehalfOf.customerRequestRef}): another staff member must approve`
      : "staff-initiated, not at the account holder's request: two other staff members must approve",
    evidence: { staffInitiated: { onBehalfOf: input.onBehalfOf } },
    notify: false,
  });
  return next;
}
