import {
  idempotencyKeySchema,
  type PreviewWithdrawalOutput,
  type WithdrawalRequest,
  withdrawalRequestSchema,
} from '@idem/contracts';
import { sql } from 'drizzle-orm';
import type { Database } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { withTenant } from '../db/tenant-scope.ts';
import { freezeCovers } from '../freeze/hold.ts';
import { getBalances } from '../journal/balances.ts';
import { assessPendingWithdrawal } from '../risk/review.ts';
import { parseOrThrow } from './input-validation.ts';
import { findByKey, findByReference } from './operation-record.ts';
import { prepareWithdrawal } from './prepare-withdrawal.ts';
import { freshContext } from './withdrawal-context.ts';

/**
 * The dry run: the decision a withdrawal would get if it were submitted now (ALLOW, REVIEW with N
 * approvers, or DENY with a code), the balance after its hold, whether a freeze would hold it, and
 * whether its id or key is taken. It validates exactly as a submission does (a refusal is the same
 * VALIDATION), then reads in a transaction the database itself makes read-only, so it writes
 * nothing: no operation, no hold, and the key and the withdrawal id stay free.
 */
export async function previewWithdrawal(
  db: Database,
  input: { tenantId: string; request: unknown; idempotencyKey?: unknown },
): Promise<PreviewWithdrawalOutput> {
  const request: WithdrawalRequest = parseOrThrow(withdrawalRequestSchema, input.request);
  const idempotencyKey =
    input.idempotencyKey === undefined ? null : parseOrThrow(idempotencyKeySchema, input.idempotencyKey);
  const context = await freshContext(db, input.tenantId, request.asset);
  const { operationId, payload } = prepareWithdrawal(input.tenantId, request, context);
  return withTenant(db, input.tenantId, async (tx) => {
    await tx.execute(sql`set local transaction_read_only = on`);
    const holder =
      (idempotencyKey ? await findByKey(tx, input.tenantId, idempotencyKey) : null) ??
      (await findByReference(tx, input.tenantId, 'withdrawal', request.withdrawalId));
    const balance = (await getBalances(tx, input.tenantId, request.accountId)).find(
      (entry) => entry.asset === request.asset,
    );
    const available = BigInt(balance?.available ?? '0');
    const after = available - BigInt(request.amountMinor);
    const [cover] = rowsOf<{ frozen: boolean }>(
      await tx.execute(freezeCovers(input.tenantId, request.asset, request.accountId)),
    );
    const assessment = await assessPendingWithdrawal(tx, {
      tenantId: input.tenantId,
      operationId,
      assetCode: payload.assetCode,
      amountMinor: payload.amountMinor,
      accountRef: payload.accountRef,
      destination: payload.destination,
    });
    // A submission stores an uncovered withdrawal REJECTED (INSUFFICIENT_FUNDS): no review follows.
    const denied = after < 0n;
    return {
      decision: denied ? 'DENY' : assessment.approvalsRequired > 0 ? 'REVIEW' : 'ALLOW',
      approvalsRequired: denied ? 0 : assessment.approvalsRequired,
      reasons: denied ? ['INSUFFICIENT_FUNDS'] : assessment.flags,
      availableMinor: available.toString(),
      balanceAfterMinor: after.toString(),
      heldByFreeze: cover?.frozen === true,
      alreadySubmitted: holder
        ? { operationId: holder.operationId, state: holder.state, idempotencyKey: holder.idempotencyKey }
        : null,
    };
  });
}
