import { sql } from 'drizzle-orm';
import type { Database } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { APP_ROLE } from '../db/tenant-scope.ts';

export interface OperationStats {
  state: string;
  operations: number;
  /** Seconds since the least recently updated operation in this state last changed. */
  oldestSeconds: number;
}

/**
 * Counts per state across all tenants, for metrics. It runs as the restricted role, which cannot
 * read another tenant's rows; `idem_operation_stats()` (migration 0003) returns aggregates only.
 */
export async function operationStats(db: Database): Promise<OperationStats[]> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('role', ${APP_ROLE}, true)`);
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
