import { randomUUID } from 'node:crypto';
import {
  feeCapProblem,
  IdemError,
  idempotencyKeySchema,
  isValidDestination,
  type Network,
  WITHDRAWAL_BATCH_ITEMS_MAX,
  type WithdrawalRequest,
  withdrawalRequestSchema,
} from '@idem/contracts';
import { payloadHash } from '@idem/contracts/payload';
import { and, eq, sql } from 'drizzle-orm';
import type { z } from 'zod';
import { batchingOf, type Database, type Executor, type Tx } from '../db/connect.ts';
import { errorCodes } from '../db/error-codes.ts';
import { rowsOf } from '../db/rows.ts';
import { assets, tenants } from '../db/schema/index.ts';
import { withTenant } from '../db/tenant-scope.ts';
import { answerForHolder, type IdentityClaim } from './claim-identity.ts';
import { operationFromRow } from './operation-row.ts';
import { type Settled, SubmissionBatcher } from './withdrawal-batcher.ts';

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
 * The same creation as its own transaction. By default it joins the database's submission batcher
 * (withdrawal-batcher.ts): under load, concurrent submissions of one tenant are written by one
 * statement, `idem_create_withdrawals`, and each caller is answered after the COMMIT that holds its
 * item; alone, a submission goes out at once. `openDatabase({ batching: false })` sends each alone.
 */
export async function submitWithdrawal(db: Database, input: Omit<CreateWithdrawalInput, 'probe'>) {
  const prepared = await prepareSubmission(db, input);
  const batcher = batcherOf(db);
  return batcher ? batcher.submit(prepared) : submitAlone(db, prepared);
}

/** The most items one `submitWithdrawals` call (the bulk API) takes: the contract's bound. */
export const MAX_BATCH_ITEMS = WITHDRAWAL_BATCH_ITEMS_MAX;

/**
 * The bulk API (`withdrawals.submitMany`): up to MAX_BATCH_ITEMS submissions of one tenant, each
 * with its own key, answered per item in the order given. Each item is validated on its own (a
 * refusal is that item's answer and writes nothing for it); the valid ones are written by one
 * statement and committed together, each answered as a single submission would be.
 */
export async function submitWithdrawals(
  db: Database,
  input: { tenantId: string; items: { request: unknown; idempotencyKey: unknown }[]; actor?: string },
): Promise<ItemOutcome[]> {
  if (input.items.length > MAX_BATCH_ITEMS) {
    throw validation('items', `at most ${MAX_BATCH_ITEMS} withdrawals per batch`);
  }
  const prepared = await Promise.all(
    input.items.map((item) =>
      prepareSubmission(db, { tenantId: input.tenantId, actor: input.actor, ...item }).then(
        (submission) => ({ ok: true as const, submission }),
        (error: unknown) => ({ ok: false as const, error }),
      ),
    ),
  );
  const valid = prepared.flatMap((entry) => (entry.ok ? [entry.submission] : []));
  const written = await createPrepared(db, valid);
  let next = 0;
  return prepared.map((entry) => (entry.ok ? (written[next++] as ItemOutcome) : entry));
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
  input: Omit<CreateWithdrawalInput, 'probe'>,
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

/**
 * One creation in one round trip: `idem_create_withdrawal` binds the tenant and the restricted role
 * itself, so it runs as a single statement (an implicit transaction) instead of BEGIN, set_config,
 * the context read, the call and COMMIT. When the process's copy of the context is stale it writes
 * nothing, and the call is made once more with fresh values. The answer comes back after COMMIT
 * (or the error that prevented it).
 */
export async function submitAlone(db: Database, submission: PreparedSubmission): Promise<IdentityClaim> {
  const { tenantId, request, idempotencyKey, actor } = submission;
  let prepared = submission.prepared;
  for (let attempt = 0; ; attempt += 1) {
    try {
      return answerForRow(await callCreate(db, prepared, idempotencyKey, actor), prepared, idempotencyKey);
    } catch (error) {
      // A stale copy (IDM03, nothing written) is read again once; a second miss means the
      // context is changing under us.
      if (attempt > 0 || !errorCodes(error).includes('IDM03')) throw error;
      prepared = prepareWithdrawal(tenantId, request, await freshContext(db, tenantId, request.asset));
    }
  }
}

/** What one item of a batch came to: the claim, or the refusal that is this item's alone. */
export type ItemOutcome = Settled<IdentityClaim>;

/**
 * Writes many prepared submissions of one tenant in one statement, `idem_create_withdrawals`
 * (migration 0052), and answers each as `submitAlone` would have: CREATED (held, or stored REJECTED
 * for insufficient funds), REPLAYED, or its own IDEMPOTENCY_CONFLICT / IN_FLIGHT. An item hashed
 * with a stale context was not written; it is sent again alone. When the statement fails as a
 * whole with an error that proves it rolled back (a deadlock between batches whose keys and
 * withdrawal ids cross, for instance), every item is sent again alone; any other failure, such as a
 * lost connection, is every item's answer, since the statement may have committed.
 */
export async function createPrepared(
  db: Database,
  submissions: PreparedSubmission[],
): Promise<ItemOutcome[]> {
  const first = submissions[0];
  if (!first) return [];
  if (submissions.some((s) => s.tenantId !== first.tenantId || s.actor !== first.actor)) {
    throw new Error('createPrepared: one batch is one tenant and one actor');
  }
  // A lone submission takes the single-item function: a fraction of the batch function's fixed
  // work, so an idle system answers as fast as it did before batching.
  if (submissions.length === 1) return [await settle(submitAlone(db, first))];
  let rows: (Record<string, unknown> | undefined)[];
  try {
    rows = await callCreateMany(db, first.tenantId, first.actor, submissions);
  } catch (error) {
    if (!rolledBack(error)) return submissions.map(() => ({ ok: false, error }));
    return Promise.all(submissions.map((submission) => settle(submitAlone(db, submission))));
  }
  return Promise.all(
    submissions.map((submission, index) => {
      const row = rows[index];
      if (!row || row.operation_id === null || row.operation_id === undefined) {
        return settle(submitAlone(db, submission));
      }
      return settle(
        Promise.resolve().then(() => answerForRow(row, submission.prepared, submission.idempotencyKey)),
      );
    }),
  );
}

async function settle(claim: Promise<IdentityClaim>): Promise<ItemOutcome> {
  try {
    return { ok: true, claim: await claim };
  } catch (error) {
    return { ok: false, error };
  }
}

/** Errors PostgreSQL answers only for a statement it rolled back, so its items can be sent again. */
function rolledBack(error: unknown): boolean {
  return errorCodes(error).some((code) => code === '40P01' || code === '40001' || code === 'IDM01');
}

async function callCreateMany(
  executor: Executor,
  tenantId: string,
  actor: string,
  submissions: PreparedSubmission[],
): Promise<(Record<string, unknown> | undefined)[]> {
  const items = submissions.map(({ prepared: { operationId, payload, hash }, idempotencyKey }, item) => ({
    item,
    operation_id: operationId,
    idempotency_key: idempotencyKey,
    reference: payload.reference,
    account_ref: payload.accountRef,
    asset_code: payload.assetCode,
    network: payload.network,
    destination: payload.destination,
    memo: payload.memo,
    amount_minor: payload.amountMinor,
    fee_cap_minor: payload.feeCapMinor,
    policy_version: payload.policyVersion,
    payload_hash: hash,
  }));
  const rows = rowsOf<Record<string, unknown>>(
    await executor.execute(
      sql`select * from idem_create_withdrawals(${tenantId}::uuid, ${JSON.stringify(items)}::jsonb, ${actor})`,
    ),
  );
  if (rows.length !== submissions.length) {
    throw new Error(`idem_create_withdrawals answered ${rows.length} rows for ${submissions.length} items`);
  }
  return rows;
}

const batchers = new WeakMap<Database, SubmissionBatcher<PreparedSubmission, IdentityClaim> | null>();

/** What the gatherer reports of each batch it sent: its size (1: a submission sent alone) and time. */
export type BatchObserver = (items: number, seconds: number) => void;

const observers = new WeakMap<Database, Set<BatchObserver>>();

/**
 * Calls `observer` for each batch of gathered submissions on this database once it is answered
 * (the server's metrics: an operator tuning IDEM_BATCH_* sees the sizes that come of it), for the
 * database's life. The bulk API's calls are not gathered and not reported.
 */
export function observeBatches(db: Database, observer: BatchObserver): void {
  const set = observers.get(db) ?? new Set<BatchObserver>();
  set.add(observer);
  observers.set(db, set);
}

/** The database's submission batcher, made on first use from its `openDatabase` settings. */
function batcherOf(db: Database): SubmissionBatcher<PreparedSubmission, IdentityClaim> | null {
  let batcher = batchers.get(db);
  if (batcher === undefined) {
    const settings = batchingOf(db);
    batcher =
      settings === false
        ? null
        : new SubmissionBatcher<PreparedSubmission, IdentityClaim>(
            settings,
            (submission) => `${submission.tenantId}/${submission.actor}`,
            (submissions) => createPrepared(db, submissions),
            (items, seconds) => {
              for (const observer of observers.get(db) ?? []) observer(items, seconds);
            },
          );
    batchers.set(db, batcher);
  }
  return batcher;
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

/** The stored context, read once for concurrent callers, and kept as the process's copy. */
function freshContext(db: Database, tenantId: string, asset: string): Promise<WithdrawalContext> {
  return contextCache.read(tenantId, asset, () =>
    withTenant(db, tenantId, (tx) => readWithdrawalContext(tx, tenantId, asset)),
  );
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
  // One read per tenant and asset at a time: a burst of first submissions (or a bulk call) shares it.
  const reading = new Map<string, Promise<WithdrawalContext>>();
  const keyOf = (tenantId: string, asset: string) => `${tenantId}/${asset}`;
  const cache = {
    get: (tenantId: string, asset: string) => entries.get(keyOf(tenantId, asset)),
    set(tenantId: string, asset: string, context: WithdrawalContext) {
      if (entries.size >= LIMIT) entries.clear();
      entries.set(keyOf(tenantId, asset), context);
    },
    read(
      tenantId: string,
      asset: string,
      load: () => Promise<WithdrawalContext>,
    ): Promise<WithdrawalContext> {
      const key = keyOf(tenantId, asset);
      let pending = reading.get(key);
      if (!pending) {
        pending = load()
          .then((context) => {
            cache.set(tenantId, asset, context);
            return context;
          })
          .finally(() => reading.delete(key));
        reading.set(key, pending);
      }
      return pending;
    },
  };
  return cache;
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
