import { WITHDRAWAL_BATCH_ITEMS_MAX } from '@idem/contracts';
import { sql } from 'drizzle-orm';
import type { Database, Executor } from '../db/connect.ts';
import { errorCodes } from '../db/error-codes.ts';
import { rowsOf } from '../db/rows.ts';
import type { IdentityClaim } from './claim-identity.ts';
import { validation } from './input-validation.ts';
import { type PreparedSubmission, prepareSubmission } from './prepare-withdrawal.ts';
import { answerForRow, submitAlone } from './single-creation.ts';
import type { Settled } from './withdrawal-batcher.ts';

/** The most items one `submitWithdrawals` call (the bulk API) takes: the contract's bound. */
export const MAX_BATCH_ITEMS = WITHDRAWAL_BATCH_ITEMS_MAX;

/** What one item of a batch came to: the claim, or the refusal that is this item's alone. */
export type ItemOutcome = Settled<IdentityClaim>;

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

/**
 * Writes many prepared submissions of one tenant in one statement, `idem_create_withdrawals`
 * (core/sql/idem_create_withdrawals.sql), and answers each as `submitAlone` would have: CREATED
 * (held, or stored REJECTED for insufficient funds), REPLAYED, or its own IDEMPOTENCY_CONFLICT /
 * IN_FLIGHT. An item hashed
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
