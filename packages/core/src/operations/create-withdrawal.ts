import { randomUUID } from 'node:crypto';
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
import { rowsOf } from '../db/rows.ts';
import { assets, tenants } from '../db/schema/index.ts';
import { payloadHash } from '../payload/payload-hash.ts';
import { explainTakenIdentity, type IdentityClaim } from './claim-identity.ts';
import { operationFromRow } from './operation-row.ts';

/**
 * Points of creation where a fault-injection probe may run: after validation (nothing written
 * yet) and after every write (nothing committed yet). Tests kill a real process there (C10).
 */
export type CreationStep = 'validated' | 'written';

export interface CreateWithdrawalInput {
  tenantId: string;
  request: unknown;
  idempotencyKey: unknown;
  actor?: string;
  probe?: (step: CreationStep) => Promise<void>;
}

/**
 * Creates a withdrawal operation, or replays the one this key already created, in the caller's
 * tenant transaction. Validation and the payload hash happen here; the writes are one statement,
 * `idem_create_withdrawal` (migrations 0006 and 0013): claim the identity (C01, C03, C04), write
 * the history row, the journal entry and the work items, and place the hold last by a conditional
 * UPDATE (C08), all in this transaction (C10). Insufficient funds is stored as a REJECTED
 * operation so that a replay returns the same answer. Invalid input writes nothing.
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

  const payload = withdrawalPayload(input.tenantId, request, network, found.policyVersion);
  const hash = payloadHash(payload);
  await probe('validated');
  const created = rowsOf<Record<string, unknown>>(
    await tx.execute(sql`select * from idem_create_withdrawal(
      ${input.tenantId}::uuid, ${randomUUID()}::uuid, ${idempotencyKey}, ${payload.reference}, ${payload.accountRef},
      ${payload.assetCode}, ${payload.network}, ${payload.destination}, ${payload.memo}, ${payload.amountMinor}::numeric,
      ${payload.feeCapMinor}::numeric, ${payload.policyVersion}::integer, ${hash}, ${input.actor ?? 'integrator'})`),
  )[0];
  if (!created) return explainTakenIdentity(tx, payload, idempotencyKey, hash);
  await probe('written');
  return { outcome: 'CREATED', operation: operationFromRow(created) };
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
