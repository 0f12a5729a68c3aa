import { randomUUID } from 'node:crypto';
import type { OperationKind } from '@idem/contracts';
import { IdemError } from '@idem/contracts';
import { type ApprovedPayload, payloadHash } from '@idem/contracts/payload';
import type { Tx } from '../db/connect.ts';
import { answerOnceReplicated } from '../db/replicated-answer.ts';
import { operations } from '../db/schema/index.ts';
import { IN_FLIGHT_STATES } from '../state-machine/transitions.ts';
import { findByKey, findByReference, type Operation } from './operation-record.ts';

export type IdentityClaim =
  | { outcome: 'CREATED'; operation: Operation }
  | { outcome: 'REPLAYED'; operation: Operation };

/** How long an IN_FLIGHT caller should wait before asking again. */
export const IN_FLIGHT_RETRY_AFTER_MS = 5_000;

/**
 * Claims (tenant, key) and (tenant, kind, reference) for a new operation, or reports who holds
 * them. The INSERT is the serialisation point: `ON CONFLICT DO NOTHING` without a target covers
 * both unique constraints, so a race on either one yields no row rather than an error (seed 002).
 * When no row comes back the holder has committed (PostgreSQL waits for it), so the reads after
 * it only report what the database already decided.
 */
export async function claimIdentity(
  tx: Tx,
  input: { payload: ApprovedPayload; idempotencyKey: string; state: Operation['state'] },
): Promise<IdentityClaim> {
  const { payload, idempotencyKey } = input;
  const hash = payloadHash(payload);
  const inserted = await tx
    .insert(operations)
    .values({
      tenantId: payload.tenantId,
      operationId: randomUUID(),
      kind: payload.kind,
      idempotencyKey,
      reference: payload.reference,
      accountRef: payload.accountRef,
      assetCode: payload.assetCode,
      network: payload.network,
      destination: payload.destination,
      memo: payload.memo,
      amountMinor: payload.amountMinor,
      feeCapMinor: payload.feeCapMinor,
      policyVersion: payload.policyVersion,
      payloadHash: hash,
      state: input.state,
      settledAt: null,
    })
    .onConflictDoNothing()
    .returning();
  const created = inserted[0] as Operation | undefined;
  if (created) return { outcome: 'CREATED', operation: created };
  return explainTakenIdentity(tx, payload, idempotencyKey, hash);
}

/**
 * The insert found the key or the reference taken. The holder has committed (PostgreSQL waited for
 * it), so these reads only report what the database already decided (see `answerForHolder`).
 */
export async function explainTakenIdentity(
  tx: Tx,
  payload: ApprovedPayload,
  idempotencyKey: string,
  hash: string,
): Promise<IdentityClaim> {
  await answerOnceReplicated(tx);
  const holder =
    (await findByKey(tx, payload.tenantId, idempotencyKey)) ??
    (await findByReference(tx, payload.tenantId, payload.kind as OperationKind, payload.reference));
  // The conflicting row is committed and rows are never deleted, so it is always found.
  if (!holder) throw new Error('claimIdentity: insert conflicted but no holder is visible');
  return answerForHolder(holder, payload, idempotencyKey, hash);
}

/**
 * What the caller is told when another operation holds its key or its reference:
 * - same key, same payload: a replay (IN_FLIGHT while the outcome is UNKNOWN);
 * - same key, another payload: IDEMPOTENCY_CONFLICT;
 * - another key holds the reference: IDEMPOTENCY_CONFLICT naming that key (C04).
 * "Same payload" is judged against the holder's own policy version: the caller hashed the
 * tenant's current one, which has moved on if the rules changed since the holder was created,
 * and a byte-identical retry must still replay (insider review finding I11-F6).
 */
export function answerForHolder(
  holder: Operation,
  payload: ApprovedPayload,
  idempotencyKey: string,
  hash: string,
): IdentityClaim {
  if (holder.idempotencyKey === idempotencyKey) {
    const retryHash =
      holder.policyVersion === payload.policyVersion
        ? hash
        : payloadHash({ ...payload, policyVersion: holder.policyVersion });
    if (holder.payloadHash !== retryHash) {
      throw new IdemError(
        'IDEMPOTENCY_CONFLICT',
        'this idempotency key was used for a different payload; a key is never reused for another instruction',
      );
    }
    if (IN_FLIGHT_STATES.includes(holder.state)) {
      throw new IdemError('IN_FLIGHT', 'the outcome of this operation is not known yet; funds stay held', {
        retryAfterMs: IN_FLIGHT_RETRY_AFTER_MS,
      });
    }
    return { outcome: 'REPLAYED', operation: holder };
  }
  // C04: the refusal names the holding key, so the caller can look up the real state.
  throw new IdemError(
    'IDEMPOTENCY_CONFLICT',
    `${payload.kind} ${payload.reference} is already claimed by key ${holder.idempotencyKey}`,
    { holderKey: holder.idempotencyKey },
  );
}
