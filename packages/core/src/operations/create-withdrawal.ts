import {
  IdemError,
  idempotencyKeySchema,
  isValidDestination,
  type Network,
  type WithdrawalRequest,
  withdrawalRequestSchema,
} from '@idem/contracts';
import { and, eq, sql } from 'drizzle-orm';
import type { z } from 'zod';
import type { Tx } from '../db/connect.ts';
import { assets, operations, tenants } from '../db/schema/index.ts';
import { postEntry } from '../journal/post-entry.ts';
import { enqueue } from '../outbox/enqueue.ts';
import { recordTransition } from '../state-machine/transition.ts';
import { claimIdentity, type IdentityClaim } from './claim-identity.ts';
import type { Operation } from './operation-record.ts';

/**
 * The steps of creation, in order. A fault-injection probe may run after each one; tests use it
 * to kill a real process between steps (C10). All of them are one transaction.
 */
export type CreationStep = 'operation-inserted' | 'hold-placed' | 'outbox-written';

export interface CreateWithdrawalInput {
  tenantId: string;
  request: unknown;
  idempotencyKey: unknown;
  actor?: string;
  probe?: (step: CreationStep) => Promise<void>;
}

/**
 * Creates a withdrawal operation, or replays the one this key already created, in the caller's
 * tenant transaction. In that one transaction: claim the identity (C01, C03, C04), place the hold
 * by a conditional UPDATE (C08) with its journal entry, then the review work item and the
 * history row (C10). Insufficient funds is stored as a REJECTED operation so that a replay returns
 * the same answer. Invalid input writes nothing.
 */
export async function createWithdrawal(tx: Tx, input: CreateWithdrawalInput): Promise<IdentityClaim> {
  const request = parseOrThrow(withdrawalRequestSchema, input.request);
  const idempotencyKey = parseOrThrow(idempotencyKeySchema, input.idempotencyKey);
  const probe = input.probe ?? (async () => {});

  const context = await tx
    .select({ network: assets.network, policyVersion: tenants.policyVersion })
    .from(assets)
    .innerJoin(tenants, eq(tenants.tenantId, assets.tenantId))
    .where(and(eq(assets.tenantId, input.tenantId), eq(assets.code, request.asset)));
  const found = context[0];
  if (!found) {
    throw validation('request.asset', `unknown asset ${request.asset}`);
  }
  const network = found.network as Network;
  if (request.network !== undefined && request.network !== network) {
    throw validation('request.network', `asset ${request.asset} is on ${network}, not ${request.network}`);
  }
  if (!isValidDestination(network, request.destination)) {
    throw validation('request.destination', `destination is not a valid ${network} address`);
  }

  const claim = await claimIdentity(tx, {
    idempotencyKey,
    state: 'REQUESTED',
    payload: withdrawalPayload(input.tenantId, request, network, found.policyVersion),
  });
  if (claim.outcome === 'REPLAYED') return claim;
  const operation = claim.operation;
  const actor = input.actor ?? 'integrator';
  await probe('operation-inserted');
  await recordTransition(tx, operation, null, { actor, reason: 'withdrawal requested' });

  const amount = BigInt(request.amountMinor);
  const hold = await postEntry(tx, {
    tenantId: input.tenantId,
    operationId: operation.operationId,
    kind: 'hold',
    postings: [
      { account: request.accountId, bucket: 'available', assetCode: request.asset, amount: -amount },
      { account: request.accountId, bucket: 'held', assetCode: request.asset, amount },
    ],
  });
  if (!hold.ok) {
    return { outcome: 'CREATED', operation: await rejectAtIntake(tx, operation, actor) };
  }
  await probe('hold-placed');
  await enqueue(tx, {
    tenantId: input.tenantId,
    topic: 'withdrawal.review',
    operationId: operation.operationId,
    payload: { operationId: operation.operationId },
  });
  await probe('outbox-written');
  return claim;
}

export function withdrawalPayload(
  tenantId: string,
  request: WithdrawalRequest,
  network: Network,
  policyVersion: number,
) {
  return {
    tenantId,
    kind: 'withdrawal',
    reference: request.withdrawalId,
    accountRef: request.accountId,
    assetCode: request.asset,
    network,
    destination: request.destination,
    memo: request.memo ?? null,
    amountMinor: request.amountMinor,
    feeCapMinor: request.feeCapMinor ?? null,
    policyVersion,
  };
}

/** No hold could be placed: the operation is stored REJECTED, so a replay answers the same. */
async function rejectAtIntake(tx: Tx, operation: Operation, actor: string): Promise<Operation> {
  const updated = await tx
    .update(operations)
    .set({
      state: 'REJECTED',
      rejectionCode: 'INSUFFICIENT_FUNDS',
      version: sql`${operations.version} + 1`,
      updatedAt: sql`now()`,
      settledAt: sql`now()`,
    })
    .where(
      and(
        eq(operations.tenantId, operation.tenantId),
        eq(operations.operationId, operation.operationId),
        eq(operations.state, 'REQUESTED'),
        eq(operations.version, operation.version),
      ),
    )
    .returning();
  const rejected = updated[0] as Operation | undefined;
  if (!rejected) throw new Error('rejectAtIntake: operation changed inside its own creating transaction');
  await recordTransition(tx, rejected, 'REQUESTED', {
    actor,
    reason: 'insufficient available balance at intake; no hold was placed',
  });
  return rejected;
}

export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new IdemError('VALIDATION', parsed.error.issues.map((issue) => issue.message).join('; '), {
    issues: parsed.error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message })),
  });
}

export function validation(path: string, message: string): IdemError {
  return new IdemError('VALIDATION', message, { issues: [{ path, message }] });
}
