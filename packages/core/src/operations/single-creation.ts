import { sql } from 'drizzle-orm';
import type { Database, Executor } from '../db/connect.ts';
import { errorCodes } from '../db/error-codes.ts';
import { rowsOf } from '../db/rows.ts';
import { answerForHolder, type IdentityClaim } from './claim-identity.ts';
import { operationFromRow } from './operation-row.ts';
import { type PreparedSubmission, type PreparedWithdrawal, prepareWithdrawal } from './prepare-withdrawal.ts';
import { freshContext, unknownAsset } from './withdrawal-context.ts';

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

export async function callCreate(
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
export function answerForRow(
  row: Record<string, unknown> | undefined,
  { operationId, payload, hash }: PreparedWithdrawal,
  idempotencyKey: string,
): IdentityClaim {
  if (!row) throw new Error('idem_create_withdrawal returned neither the operation nor its holder');
  const operation = operationFromRow(row);
  if (operation.operationId === operationId) return { outcome: 'CREATED', operation };
  return answerForHolder(operation, payload, idempotencyKey, hash);
}
