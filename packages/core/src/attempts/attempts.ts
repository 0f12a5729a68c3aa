import { randomUUID } from 'node:crypto';
import { IdemError } from '@idem/contracts';
import { and, asc, desc, eq, gt, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import type { Executor, Tx } from '../db/connect.ts';
import { feeBumpRequests, operations, proposals, signedAttempts } from '../db/schema/index.ts';
import { getOperation, type Operation } from '../operations/operation-record.ts';
import { assertLeaseMs } from '../state-machine/lease.ts';
import { recordTransition } from '../state-machine/transition.ts';

export type SignedAttempt = typeof signedAttempts.$inferSelect & {
  kind: 'original' | 'replacement' | 'cancel';
};
export type AttemptKind = SignedAttempt['kind'];

/** The fees an attempt was signed with, in wei; the cap is on gasLimit * maxFeePerGas. */
export interface AttemptFees {
  gasLimit: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/** States in which a signed withdrawal may be replaced or cancelled: sent, not settled. */
export const REPLACEABLE_STATES = ['BROADCAST', 'UNKNOWN'] as const;

/** Every signed attempt of a withdrawal, oldest first. */
export async function listAttempts(
  tx: Executor,
  tenantId: string,
  operationId: string,
): Promise<SignedAttempt[]> {
  return (await attemptsByOperation(tx, tenantId, [operationId])).get(operationId) ?? [];
}

/** The signed attempts of several withdrawals in one query, each list oldest first. */
export async function attemptsByOperation(
  tx: Executor,
  tenantId: string,
  operationIds: string[],
): Promise<Map<string, SignedAttempt[]>> {
  const byOperation = new Map<string, SignedAttempt[]>();
  if (operationIds.length === 0) return byOperation;
  const rows = (await tx
    .select()
    .from(signedAttempts)
    .where(and(eq(signedAttempts.tenantId, tenantId), inArray(signedAttempts.operationId, operationIds)))
    .orderBy(asc(signedAttempts.operationId), asc(signedAttempts.attemptNo))) as SignedAttempt[];
  for (const row of rows) {
    const list = byOperation.get(row.operationId) ?? [];
    list.push(row);
    byOperation.set(row.operationId, list);
  }
  return byOperation;
}

/**
 * Every transaction hash of ours that could settle this withdrawal (all share one nonce, so at most
 * one can be mined). Watching, reconciliation and the "not any of ours" check all read this list.
 * An operation signed before attempts were recorded has its original hash only.
 */
export async function attemptHashes(tx: Executor, tenantId: string, operationId: string): Promise<string[]> {
  const attempts = await listAttempts(tx, tenantId, operationId);
  if (attempts.length > 0) return attempts.map((a) => a.txHash);
  const op = await getOperation(tx, tenantId, operationId);
  return op.txHash ? [op.txHash] : [];
}

/**
 * Attempt 1: the original bytes, recorded beside the operation's immutable signed_artifact when it
 * is signed (recordSigned), or lazily for a withdrawal signed before attempts existed. Idempotent.
 */
export async function recordOriginalAttempt(
  tx: Tx,
  op: Operation,
  input: { fees: AttemptFees; createdBy: string },
): Promise<void> {
  if (!op.signedArtifact || !op.txHash || op.chainNonce === null) return;
  await tx
    .insert(signedAttempts)
    .values({
      tenantId: op.tenantId,
      operationId: op.operationId,
      attemptNo: 1,
      nonce: op.chainNonce,
      kind: 'original',
      signedArtifact: op.signedArtifact,
      txHash: op.txHash,
      gasLimit: input.fees.gasLimit.toString(),
      maxFeePerGas: input.fees.maxFeePerGas.toString(),
      maxPriorityFeePerGas: input.fees.maxPriorityFeePerGas.toString(),
      leaseGeneration: op.leaseGeneration,
      createdBy: input.createdBy,
    })
    .onConflictDoNothing();
}

/**
 * Takes a short lease on a sent withdrawal for a replacement or a cancel (one conditional UPDATE:
 * the version read, a replaceable state, no live lease held by anyone). The returned generation
 * fences `recordAttempt`: a second worker cannot take the lease until this one expires, and the
 * database refuses an attempt carrying an older generation. The history says who took it and why.
 * Null when another worker holds it or the operation moved on.
 */
export async function leaseForReplacement(
  tx: Tx,
  input: { operation: Operation; workerId: string; leaseMs: number; reason: string },
): Promise<{ operation: Operation; leaseGeneration: number } | null> {
  const { operation: op, workerId, leaseMs } = input;
  assertLeaseMs(leaseMs);
  const rows = await tx
    .update(operations)
    .set({
      leaseOwner: workerId,
      leaseExpiresAt: sql`now() + ${leaseMs} * interval '1 millisecond'`,
      leaseGeneration: sql`${operations.leaseGeneration} + 1`,
      version: sql`${operations.version} + 1`,
    })
    .where(
      and(
        eq(operations.tenantId, op.tenantId),
        eq(operations.operationId, op.operationId),
        eq(operations.version, op.version),
        eq(operations.payloadHash, op.payloadHash),
        sql`${operations.state} in ('BROADCAST', 'UNKNOWN')`,
        or(isNull(operations.leaseExpiresAt), lt(operations.leaseExpiresAt, sql`now()`)),
      ),
    )
    .returning();
  const leased = rows[0] as Operation | undefined;
  if (!leased) return null;
  await recordTransition(tx, leased, op.state, {
    actor: workerId,
    reason: input.reason,
    leaseGeneration: leased.leaseGeneration,
    notify: false,
  });
  return { operation: leased, leaseGeneration: leased.leaseGeneration };
}

/**
 * Records a replacement or cancel attempt, durably, BEFORE it is broadcast (the rule C12 sets for
 * the original). Call in the transaction that took the lease and signed; the database checks the
 * nonce, the order, the lease generation and that nothing but a cancel follows a cancel.
 */
export async function recordAttempt(
  tx: Tx,
  input: {
    tenantId: string;
    operationId: string;
    leaseGeneration: number;
    kind: Exclude<AttemptKind, 'original'>;
    signedArtifact: string;
    txHash: string;
    nonce: number;
    fees: AttemptFees;
    workerId: string;
    /** Who asked: 'policy' for an automatic bump, 'staff:<id>', or 'proposal:<id>' for a cancel. */
    requestedBy: string;
  },
): Promise<SignedAttempt> {
  const previous = await listAttempts(tx, input.tenantId, input.operationId);
  const last = previous.at(-1);
  if (!last) throw new IdemError('INVALID_TRANSITION', 'the original attempt is not recorded');
  const rows = await tx
    .insert(signedAttempts)
    .values({
      tenantId: input.tenantId,
      operationId: input.operationId,
      attemptNo: last.attemptNo + 1,
      nonce: input.nonce,
      kind: input.kind,
      signedArtifact: input.signedArtifact,
      txHash: input.txHash,
      gasLimit: input.fees.gasLimit.toString(),
      maxFeePerGas: input.fees.maxFeePerGas.toString(),
      maxPriorityFeePerGas: input.fees.maxPriorityFeePerGas.toString(),
      leaseGeneration: input.leaseGeneration,
      createdBy: input.workerId,
      requestedBy: input.requestedBy,
    })
    .returning();
  return rows[0] as SignedAttempt;
}

/** The approved fee cap now in force (total fee, native minor units), and where it comes from. */
export interface FeeCap {
  capMinor: bigint | null;
  /** 0: the withdrawal's own approved payload; n: the n-th approved raise (a raise_fee_cap proposal). */
  version: number;
  proposalId: string | null;
}

/**
 * The cap in force: the highest cap of an executed `raise_fee_cap` proposal for this withdrawal,
 * else the approved payload's own feeCapMinor. An executed proposal is immutable (its trigger), so
 * it is the durable record of the new cap; the operation's payload hash never changes.
 */
export async function feeCapInForce(tx: Executor, op: Operation): Promise<FeeCap> {
  const raises = await executedProposals(tx, op, 'raise_fee_cap');
  let cap: FeeCap = {
    capMinor: op.feeCapMinor ? BigInt(op.feeCapMinor) : null,
    version: 0,
    proposalId: null,
  };
  raises.forEach((raise, index) => {
    const value = BigInt(String(raise.payload.feeCapMinor));
    if (cap.capMinor === null || value > cap.capMinor) {
      cap = { capMinor: value, version: index + 1, proposalId: raise.proposalId };
    }
  });
  return cap;
}

/** The executed cancel proposal for this withdrawal, if one was approved. */
export async function approvedCancel(
  tx: Executor,
  op: Operation,
): Promise<{ proposalId: string; proposedBy: string } | null> {
  const found = await executedProposals(tx, op, 'cancel_withdrawal');
  const first = found[0];
  return first ? { proposalId: first.proposalId, proposedBy: first.proposedBy } : null;
}

async function executedProposals(tx: Executor, op: Operation, kind: string) {
  return tx
    .select({
      proposalId: proposals.proposalId,
      payload: proposals.payload,
      proposedBy: proposals.proposedBy,
    })
    .from(proposals)
    .where(
      and(
        eq(proposals.tenantId, op.tenantId),
        eq(proposals.targetOperationId, op.operationId),
        eq(proposals.kind, kind),
        eq(proposals.state, 'EXECUTED'),
      ),
    )
    .orderBy(asc(proposals.decidedAt));
}

/**
 * A staff member asks for a fee bump within the approved cap (the operate permission suffices; a
 * bump above the cap needs an approved raise_fee_cap proposal first). The worker holds the key and
 * signs it on its next pass; nothing is signed here.
 */
export async function requestFeeBump(
  tx: Tx,
  input: { tenantId: string; operationId: string; actor: string; reason: string },
): Promise<{ requestId: string }> {
  const op = await getOperation(tx, input.tenantId, input.operationId);
  if (op.kind !== 'withdrawal' || !(REPLACEABLE_STATES as readonly string[]).includes(op.state)) {
    throw new IdemError('INVALID_TRANSITION', `a ${op.state} withdrawal has nothing to bump`);
  }
  if (op.chainNonce === null || !op.txHash) {
    throw new IdemError('INVALID_TRANSITION', 'only a signed chain transaction can be bumped');
  }
  if (await approvedCancel(tx, op)) {
    throw new IdemError('INVALID_TRANSITION', 'the withdrawal is being cancelled; it is not bumped');
  }
  const requestId = randomUUID();
  await tx.insert(feeBumpRequests).values({
    tenantId: input.tenantId,
    requestId,
    operationId: input.operationId,
    requestedBy: input.actor,
    reason: input.reason,
  });
  return { requestId };
}

/** The oldest staff bump request newer than the last attempt, if any (the worker serves it). */
export async function openBumpRequest(
  tx: Executor,
  op: Operation,
  lastAttemptAt: Date | null,
): Promise<{ requestId: string; requestedBy: string } | null> {
  const rows = await tx
    .select({ requestId: feeBumpRequests.requestId, requestedBy: feeBumpRequests.requestedBy })
    .from(feeBumpRequests)
    .where(
      and(
        eq(feeBumpRequests.tenantId, op.tenantId),
        eq(feeBumpRequests.operationId, op.operationId),
        ...(lastAttemptAt ? [gt(feeBumpRequests.createdAt, lastAttemptAt)] : []),
      ),
    )
    .orderBy(desc(feeBumpRequests.createdAt))
    .limit(1);
  return rows[0] ?? null;
}

/**
 * Writes a history row for something decided about a withdrawal that moves no state (a cancel or a
 * new fee cap approved): the version advances by one, conditionally on the version read.
 */
export async function noteOnHistory(
  tx: Tx,
  op: Operation,
  note: { actor: string; reason: string; evidence: Record<string, unknown> },
): Promise<Operation> {
  const rows = await tx
    .update(operations)
    .set({ version: sql`${operations.version} + 1` })
    .where(
      and(
        eq(operations.tenantId, op.tenantId),
        eq(operations.operationId, op.operationId),
        eq(operations.version, op.version),
        eq(operations.payloadHash, op.payloadHash),
      ),
    )
    .returning();
  const next = rows[0] as Operation | undefined;
  if (!next) throw new IdemError('STALE_WRITE', 'the withdrawal changed while this was being recorded');
  await recordTransition(tx, next, op.state, { ...note, notify: false });
  return next;
}
