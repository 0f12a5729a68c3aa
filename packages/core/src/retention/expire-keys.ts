import { and, eq, inArray, isNotNull, isNull, lt, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { operations } from '../db/schema/index.ts';
import { SETTLED_STATES } from '../state-machine/transitions.ts';

/**
 * Idempotency retention (C07, documented in docs/RETENTION.md). A key is kept while its operation
 * is unsettled, however long that takes; once settled for longer than the horizon, the key is
 * replaced by its SHA-256 digest, so the clear key leaves the immutable core. The operation, its
 * history and its claim on the withdrawal reference stay: an expired key can never re-open a
 * withdrawal. The database refuses to expire the key of an unsettled operation.
 */
export const KEY_RETENTION_DAYS_DEFAULT = 90;

export async function expireIdempotencyKeys(
  tx: Tx,
  input: { tenantId: string; settledBefore: Date; batchSize?: number },
): Promise<number> {
  const batch = Math.min(Math.max(input.batchSize ?? 1000, 1), 10_000);
  const due = tx
    .select({ operationId: operations.operationId })
    .from(operations)
    .where(
      and(
        eq(operations.tenantId, input.tenantId),
        inArray(operations.state, [...SETTLED_STATES]),
        isNotNull(operations.settledAt),
        lt(operations.settledAt, input.settledBefore),
        isNull(operations.keyExpiredAt),
      ),
    )
    .limit(batch);
  const expired = await tx
    .update(operations)
    .set({
      idempotencyKey: sql`'expired:' || encode(sha256(convert_to(${operations.idempotencyKey}, 'UTF8')), 'hex')`,
      keyExpiredAt: sql`now()`,
      version: sql`${operations.version} + 1`,
    })
    .where(and(eq(operations.tenantId, input.tenantId), inArray(operations.operationId, due)))
    .returning({ operationId: operations.operationId });
  return expired.length;
}
