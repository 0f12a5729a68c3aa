import { sql } from 'drizzle-orm';
import type { Database, Tx } from './connect.ts';

/** The restricted role row-level security binds: neither superuser nor table owner. */
export const APP_ROLE = 'idem_app';

/**
 * Switches the current transaction to the application role, and binds `app.tenant_id` when a
 * tenant is given (one statement either way). Both settings end with the transaction. The switch
 * matters even where the connection is already the application role: PGlite always connects as a
 * superuser, which row-level security would not bind.
 */
export async function actAsAppRole(tx: Tx, tenantId?: string): Promise<void> {
  await tx.execute(
    tenantId === undefined
      ? sql`select set_config('role', ${APP_ROLE}, true)`
      : sql`select set_config('app.tenant_id', ${tenantId}, true), set_config('role', ${APP_ROLE}, true)`,
  );
}

/**
 * Runs `work` in one transaction as the application role with no tenant bound: for the narrow
 * SECURITY DEFINER look-ups that cross tenants (tenants with work, sign-in's slug and e-mail
 * look-ups, metrics), where the role itself can read no tenant's rows.
 */
export async function withAppRole<T>(db: Database, work: (tx: Tx) => Promise<T>): Promise<T> {
  return db.transaction(async (tx) => {
    await actAsAppRole(tx);
    return work(tx);
  });
}
