import { expireIdempotencyKeys, KEY_RETENTION_DAYS_DEFAULT, withTenant } from '@idem/core';
import type { WorkerContext } from '../context.ts';

export const KEY_RETENTION_RUN_EVERY_MS = 60 * 60_000;

/**
 * Applies the idempotency retention policy (docs/RETENTION.md, C07): keys of operations settled
 * longer than the horizon are replaced by their digest. Unsettled operations keep their keys; the
 * database refuses otherwise.
 */
export async function expireSettledKeys(ctx: WorkerContext, tenantId: string): Promise<number> {
  const settledBefore = new Date(Date.now() - KEY_RETENTION_DAYS_DEFAULT * 24 * 60 * 60_000);
  return withTenant(ctx.db, tenantId, (tx) => expireIdempotencyKeys(tx, { tenantId, settledBefore }));
}
