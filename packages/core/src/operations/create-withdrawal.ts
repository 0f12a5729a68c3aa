import { randomUUID } from 'node:crypto';
import {
  feeCapProblem,
  IdemError,
  idempotencyKeySchema,
  isValidDestination,
  type Network,
  type WithdrawalRequest,
  withdrawalRequestSchema,
} from '@idem/contracts';
import { payloadHash } from '@idem/contracts/payload';
import { and, eq, sql } from 'drizzle-orm';
import type { z } from 'zod';
import type { Database, Executor, Tx } from '../db/connect.ts';
import { errorCodes } from '../db/error-codes.ts';
import { rowsOf } from '../db/rows.ts';
import { assets, tenants } from '../db/schema/index.ts';
import { withTenant } from '../db/tenant-scope.ts';
import { answerForHolder, type IdentityClaim } from './claim-identity.ts';
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
 * `idem_create_withdrawal` (migrations 0006, 0013, 0014, 0015): claim the identity (C01, C03, C04),
 * write the history row, the journal entry and the work items, and place the hold last (its
 * postings, which the database applies to the balance by a conditional UPDATE, C08), all in this
 * transaction (C10). Insufficient funds is stored as a REJECTED operation so that a replay returns
 * the same answer. Invalid input writes nothing.
 */
export async function createWithdrawal(tx: Tx, input: CreateWithdrawalInput): Promise<IdentityClaim> {
  const { request, idempotencyKey } = parseInput(input);
  const context = await readWithdrawalContext(tx, input.tenantId, request.asset);
  const prepared = prepareWithdrawal(input.tenantId, request, context);
  await input.probe?.('validated');
  const claim = answerForRow(
    await callCreate(tx, prepared, idempotencyKey, input.actor),
    prepared,
    idempotencyKey,
  );
  await input.probe?.('written');
  return claim;
}

/**
 * The same creation as its own transaction, in one round trip: `idem_create_withdrawal` binds the
 * tenant and the restricted role itself, so it runs as a single statement (an implicit
 * transaction) instead of BEGIN, set_config, the context read, the call and COMMIT. The asset's
 * network and the tenant's policy version come from a per-process copy that the function checks
 * against the stored ones; when the copy is stale it writes nothing, and the call is made once
 * more with fresh values. The answer comes back after COMMIT (or the error that prevented it).
 */
export async function submitWithdrawal(db: Database, input: Omit<CreateWithdrawalInput, 'probe'>) {
  const { request, idempotencyKey } = parseInput(input);
  let context = contextCache.get(input.tenantId, request.asset);
  for (let attempt = 0; ; attempt += 1) {
    if (!context) {
      context = await withTenant(db, input.tenantId, (tx) =>
        readWithdrawalContext(tx, input.tenantId, request.asset),
      );
      contextCache.set(input.tenantId, request.asset, context);
    }
    const prepared = prepareWithdrawal(input.tenantId, request, context);
    try {
      return answerForRow(
        await callCreate(db, prepared, idempotencyKey, input.actor),
        prepared,
        idempotencyKey,
      );
    } catch (error) {
      // A stale copy (IDM03, nothing written) is read again once; a second miss means the
      // context is changing under us.
      if (attempt > 0 || !errorCodes(error).includes('IDM03')) throw error;
      context = undefined;
    }
  }
}

interface WithdrawalContext {
  network: Network;
  policyVersion: number;
}

interface PreparedWithdrawal {
  operationId: string;
  payload: ReturnType<typeof withdrawalPayload>;
  hash: string;
}

function parseInput(input: Pick<CreateWithdrawalInput, 'request' | 'idempotencyKey'>) {
  return {
    request: parseOrThrow(withdrawalRequestSchema, input.request),
    idempotencyKey: parseOrThrow(idempotencyKeySchema, input.idempotencyKey),
  };
}

async function readWithdrawalContext(tx: Tx, tenantId: string, asset: string): Promise<WithdrawalContext> {
  const [found] = await tx
    .select({ network: assets.network, policyVersion: tenants.policyVersion })
    .from(assets)
    .innerJoin(tenants, eq(tenants.tenantId, assets.tenantId))
    .where(and(eq(assets.tenantId, tenantId), eq(assets.code, asset)));
  if (!found) throw unknownAsset(asset);
  return { network: found.network as Network, policyVersion: found.policyVersion };
}

/** Validation that needs the asset's network, then the approved payload and its hash (C02). */
function prepareWithdrawal(
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

async function callCreate(
  executor: Executor,
  { operationId, payload, hash }: PreparedWithdrawal,
  idempotencyKey: string,
  actor: string | undefined,
): Promise<Record<string, unknown> | undefined> {
  try {
    const rows = rowsOf<Record<string, unknown>>(
      await executor.execute(sql`select * from idem_create_withdrawal(
      ${payload.tenantId}::uuid, ${operationId}::uuid, ${idempotencyKey}, ${payload.reference}, ${payload.accountRef},
      ${payload.assetCode}, ${payload.network}, ${payload.destination}, ${payload.memo}, ${payload.amountMinor}::numeric,
      ${payload.feeCapMinor}::numeric, ${payload.policyVersion}::integer, ${hash}, ${actor ?? 'integrator'})`),
    );
    return rows[0];
  } catch (error) {
    if (errorCodes(error).includes('IDM02')) throw unknownAsset(payload.assetCode);
    throw error;
  }
}

/** The function returns the new operation, or the committed holder of the key or the reference. */
function answerForRow(
  row: Record<string, unknown> | undefined,
  { operationId, payload, hash }: PreparedWithdrawal,
  idempotencyKey: string,
): IdentityClaim {
  if (!row) throw new Error('idem_create_withdrawal returned neither the operation nor its holder');
  const operation = operationFromRow(row);
  if (operation.operationId === operationId) return { outcome: 'CREATED', operation };
  return answerForHolder(operation, payload, idempotencyKey, hash);
}

function unknownAsset(asset: string): IdemError {
  return validation('request.asset', `unknown asset ${asset}`);
}

/**
 * Asset networks and policy versions, per tenant and asset, for `submitWithdrawal`. Only a hint:
 * the database function checks every value it is given, so a stale or foreign entry costs one
 * more read and call, never a wrong payload. Bounded so a process serving many tenants stays small.
 */
const contextCache = (() => {
  const LIMIT = 10_000;
  const entries = new Map<string, WithdrawalContext>();
  const keyOf = (tenantId: string, asset: string) => `${tenantId}/${asset}`;
  return {
    get: (tenantId: string, asset: string) => entries.get(keyOf(tenantId, asset)),
    set(tenantId: string, asset: string, context: WithdrawalContext) {
      if (entries.size >= LIMIT) entries.clear();
      entries.set(keyOf(tenantId, asset), context);
    },
  };
})();

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
