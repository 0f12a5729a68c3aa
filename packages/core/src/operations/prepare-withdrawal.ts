import { randomUUID } from 'node:crypto';
import {
  feeCapProblem,
  idempotencyKeySchema,
  isValidDestination,
  type Network,
  type WithdrawalRequest,
  withdrawalRequestSchema,
} from '@idem/contracts';
import { payloadHash } from '@idem/contracts/payload';
import type { Database } from '../db/connect.ts';
import { parseOrThrow, validation } from './input-validation.ts';
import { contextCache, freshContext, type WithdrawalContext } from './withdrawal-context.ts';

/** What a caller submits: the request and its key, unparsed, for one tenant. */
export interface WithdrawalSubmissionInput {
  tenantId: string;
  request: unknown;
  idempotencyKey: unknown;
  actor?: string;
}

/** The approved payload, its hash and the operation id it will be written under. */
export interface PreparedWithdrawal {
  operationId: string;
  payload: ReturnType<typeof withdrawalPayload>;
  hash: string;
}

/** A submission validated and hashed, ready to be written alone or in a batch. */
export interface PreparedSubmission {
  tenantId: string;
  request: WithdrawalRequest;
  idempotencyKey: string;
  actor: string;
  prepared: PreparedWithdrawal;
}

/**
 * Validation and the payload hash, before anything is written: a refusal here (VALIDATION) is the
 * caller's alone. The asset's network and the tenant's policy version come from a per-process copy
 * that the database function checks against the stored ones.
 */
export async function prepareSubmission(
  db: Database,
  input: WithdrawalSubmissionInput,
): Promise<PreparedSubmission> {
  const { request, idempotencyKey } = parseInput(input);
  const context =
    contextCache.get(input.tenantId, request.asset) ??
    (await freshContext(db, input.tenantId, request.asset));
  return {
    tenantId: input.tenantId,
    request,
    idempotencyKey,
    actor: input.actor ?? 'integrator',
    prepared: prepareWithdrawal(input.tenantId, request, context),
  };
}

export function parseInput(input: Pick<WithdrawalSubmissionInput, 'request' | 'idempotencyKey'>) {
  return {
    request: parseOrThrow(withdrawalRequestSchema, input.request),
    idempotencyKey: parseOrThrow(idempotencyKeySchema, input.idempotencyKey),
  };
}

/** Validation that needs the asset's network, then the approved payload and its hash (C02). */
export function prepareWithdrawal(
  tenantId: string,
  request: WithdrawalRequest,
  context: WithdrawalContext,
): PreparedWithdrawal {
  const { network } = context;
  if (request.network !== undefined && request.network !== network) {
    throw validation('request.network', `asset ${request.asset} is on ${network}, not ${request.network}`);
  }
  if (!isValidDestination(network, request.destination)) {
    throw validation('request.destination', `destination is not a valid ${network} address`);
  }
  const feeCap = request.feeCapMinor === undefined ? null : feeCapProblem(network, request.feeCapMinor);
  if (feeCap) throw validation('request.feeCapMinor', feeCap);
  const payload = withdrawalPayload(tenantId, request, network, context.policyVersion);
  return { operationId: randomUUID(), payload, hash: payloadHash(payload) };
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
