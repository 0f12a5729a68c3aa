import { IdemError } from '@idem/contracts';
import { and, eq, isNull, lt, or, sql } from 'drizzle-orm';
import { type AttemptFees, recordOriginalAttempt } from '../attempts/attempts.ts';
import type { Tx } from '../db/connect.ts';
import { operations } from '../db/schema/index.ts';
import { notHeldByFreeze } from '../freeze/hold.ts';
import { assertPayloadIntact, getOperation, type Operation } from '../operations/operation-record.ts';
import { recordTransition, transition } from './transition.ts';

export const LEASE_MS_MAX = 10 * 60_000;

/** The columns a new lease sets: owner, expiry, and the next fencing generation. */
function newLease(workerId: string, leaseMs: number) {
  assertLeaseMs(leaseMs);
  return {
    leaseOwner: workerId,
    leaseExpiresAt: sql`now() + ${leaseMs} * interval '1 millisecond'`,
    leaseGeneration: sql`${operations.leaseGeneration} + 1`,
    version: sql`${operations.version} + 1`,
    updatedAt: sql`now()`,
  };
}

export function assertLeaseMs(leaseMs: number): void {
  if (!Number.isInteger(leaseMs) || leaseMs <= 0 || leaseMs > LEASE_MS_MAX) {
    throw new IdemError('VALIDATION', `leaseMs must be an integer in 1..${LEASE_MS_MAX}`);
  }
}

export interface Leased {
  operation: Operation;
  /** The fencing number every later write by this worker must carry. */
  leaseGeneration: number;
}

/**
 * A worker's lease on one withdrawal is what lets it sign: owner, expiry and a fencing generation
 * on the operation row, taken here and checked by every later write (docs/LEDGER.md, Glossary).
 */

/**
 * A worker leases an APPROVED withdrawal for signing (APPROVED -> SIGNING) by one conditional UPDATE with the
 * state, version and payload hash in its WHERE clause (C09). It sets the owner, the lease expiry
 * and a new lease generation. An expired lease can be taken over only while nothing is signed (C12).
 * A withdrawal under a freeze in force (its tenant's, its asset's or its account's) is not claimed:
 * the freeze is a condition of this same statement (../freeze/hold.ts), so a freeze committed before
 * the claim runs holds it, whatever the worker read before. It stays APPROVED, held and shown.
 * Returns null when another worker won, the operation moved on or a freeze holds it: the caller does nothing.
 */
export async function leaseForSigning(
  tx: Tx,
  input: { operation: Operation; workerId: string; leaseMs: number },
): Promise<Leased | null> {
  const { operation: op, workerId, leaseMs } = input;
  const leasable = or(
    eq(operations.state, 'APPROVED'),
    and(
      eq(operations.state, 'SIGNING'),
      lt(operations.leaseExpiresAt, sql`now()`),
      isNull(operations.signedArtifact),
    ),
  );
  const updated = await tx
    .update(operations)
    .set({ state: 'SIGNING', ...newLease(workerId, leaseMs) })
    .where(
      and(
        eq(operations.tenantId, op.tenantId),
        eq(operations.operationId, op.operationId),
        eq(operations.kind, 'withdrawal'),
        eq(operations.version, op.version),
        eq(operations.payloadHash, op.payloadHash),
        leasable,
        notHeldByFreeze(),
      ),
    )
    .returning();
  const leased = updated[0] as Operation | undefined;
  if (!leased) return null;
  await recordTransition(tx, leased, op.state, {
    actor: workerId,
    reason: op.state === 'APPROVED' ? 'claimed for signing' : 'expired lease reclaimed; nothing was signed',
    leaseGeneration: leased.leaseGeneration,
  });
  return { operation: leased, leaseGeneration: leased.leaseGeneration };
}

/**
 * Persists the signed bytes and transaction hash (SIGNING -> SIGNED) before any broadcast (C12).
 * The signer recomputes the payload hash from the stored fields first and refuses a mismatch
 * (C02). Fenced by the lease generation: a worker whose lease was reclaimed gets STALE_WRITE.
 */
export async function recordSigned(
  tx: Tx,
  input: {
    tenantId: string;
    operationId: string;
    leaseGeneration: number;
    signedArtifact: string;
    /** The chain transaction hash; null on a custodian rail, where the provider assigns ids. */
    txHash: string | null;
    workerId: string;
    /** The hot-wallet nonce (EVM), allocated in this same transaction by `allocateNonce`. */
    chainNonce?: number;
    /** The fees the chain transaction was signed with: recorded as its attempt 1. */
    fees?: AttemptFees;
  },
): Promise<Operation> {
  const op = await getOperation(tx, input.tenantId, input.operationId);
  assertPayloadIntact(op);
  if (op.leaseGeneration !== input.leaseGeneration || op.state !== 'SIGNING') {
    throw new IdemError(
      'STALE_WRITE',
      'the lease was taken over or the operation moved on; not recording the signature',
    );
  }
  const signed = await transition(tx, op, 'SIGNED', {
    actor: input.workerId,
    reason: 'signed bytes persisted before broadcast',
    evidence: { txHash: input.txHash, chainNonce: input.chainNonce ?? null },
    leaseGeneration: input.leaseGeneration,
    set: { signedArtifact: input.signedArtifact, txHash: input.txHash, chainNonce: input.chainNonce ?? null },
    where: [isNull(operations.signedArtifact), eq(operations.leaseOwner, input.workerId)],
  });
  // The original stays in the operation row (immutable) and is also attempt 1 of the attempts table.
  if (input.fees) await recordOriginalAttempt(tx, signed, { fees: input.fees, createdBy: input.workerId });
  return signed;
}

/** Gives an unsigned lease back (SIGNING -> APPROVED), e.g. on a clean shutdown before signing. */
export async function releaseLease(
  tx: Tx,
  input: { tenantId: string; operationId: string; leaseGeneration: number; workerId: string; reason: string },
): Promise<Operation> {
  const op = await getOperation(tx, input.tenantId, input.operationId);
  return transition(tx, op, 'APPROVED', {
    actor: input.workerId,
    reason: input.reason,
    leaseGeneration: input.leaseGeneration,
    set: { clearLease: true },
    where: [isNull(operations.signedArtifact)],
  });
}

/**
 * Takes over a SIGNED withdrawal whose worker's lease expired before it recorded a broadcast (the
 * worker died between signing and recording). The new owner gets a new generation and may only
 * broadcast the stored bytes: nothing is signed again (C12). Returns null if another worker won.
 */
export async function takeOverSigned(
  tx: Tx,
  input: { operation: Operation; workerId: string; leaseMs: number },
): Promise<Leased | null> {
  const { operation: op, workerId, leaseMs } = input;
  const updated = await tx
    .update(operations)
    .set(newLease(workerId, leaseMs))
    .where(
      and(
        eq(operations.tenantId, op.tenantId),
        eq(operations.operationId, op.operationId),
        eq(operations.state, 'SIGNED'),
        eq(operations.version, op.version),
        eq(operations.payloadHash, op.payloadHash),
        or(isNull(operations.leaseExpiresAt), lt(operations.leaseExpiresAt, sql`now()`)),
        // Signed but never sent: under a freeze it is held too (nothing new is sent).
        notHeldByFreeze(),
      ),
    )
    .returning();
  const taken = updated[0] as Operation | undefined;
  if (!taken) return null;
  await recordTransition(tx, taken, 'SIGNED', {
    actor: workerId,
    reason: 'previous worker lost its lease after signing; resuming with the stored bytes only',
    leaseGeneration: taken.leaseGeneration,
    notify: false,
  });
  return { operation: taken, leaseGeneration: taken.leaseGeneration };
}
