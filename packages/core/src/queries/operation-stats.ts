import { sql } from 'drizzle-orm';
import { withAppRole } from '../db/app-role.ts';
import type { Database } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';

export interface OperationStats {
  state: string;
  operations: number;
  /** Seconds since the least recently updated operation in this state last changed. */
  oldestSeconds: number;
}

/**
 * Counts per state of the operations still in flight (IN_FLIGHT_STATES), across all tenants, for
 * metrics. It runs as the restricted role, which cannot read another tenant's rows;
 * `idem_operation_stats()` (core/sql/idem_operation_stats.sql) returns aggregates only, read from the partial
 * index of in-flight states, so its cost follows the work in progress, not the history.
 */
export async function operationStats(db: Database): Promise<OperationStats[]> {
  return withAppRole(db, async (tx) => {
    const result = await tx.execute(
      sql`select state, operations, oldest_seconds from idem_operation_stats()`,
    );
    return rowsOf<{ state: string; operations: string | number; oldest_seconds: string | number }>(
      result,
    ).map((row) => ({
      state: row.state,
      operations: Number(row.operations),
      oldestSeconds: Number(row.oldest_seconds),
    }));
  });
}

/**
 * Counts per settled state (REJECTED, CONFIRMED, VERIFIED_NOT_SENT, REVERSED), across all tenants.
 * This one reads the whole history (core/sql/idem_settled_operation_stats.sql): a caller
 * reads it seldom (the server: once per IDEM_METRICS_SETTLED_CACHE_MS), never on every scrape.
 */
export async function settledOperationStats(db: Database): Promise<{ state: string; operations: number }[]> {
  return withAppRole(db, async (tx) => {
    const result = await tx.execute(sql`select state, operations from idem_settled_operation_stats()`);
    return rowsOf<{ state: string; operations: string | number }>(result).map((row) => ({
      state: row.state,
      operations: Number(row.operations),
    }));
  });
}
