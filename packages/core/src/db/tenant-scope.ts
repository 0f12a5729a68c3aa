import { IdemError } from '@idem/contracts';
import { sql } from 'drizzle-orm';
import { z } from 'zod';
import { actAsAppRole } from './app-role.ts';
import type { Database, Tx } from './connect.ts';

const tenantIdSchema = z.uuid();

/**
 * Runs `work` in one transaction scoped to one tenant: the transaction switches to the restricted
 * role and binds `app.tenant_id`, so row-level security filters every statement even when the
 * connection itself is a superuser (as PGlite's always is). Nothing tenant-scoped runs outside it.
 */
export async function withTenant<T>(
  db: Database,
  tenantId: string,
  work: (tx: Tx) => Promise<T>,
): Promise<T> {
  return scopedTransaction(db, tenantId, (tx) => actAsAppRole(tx, tenantId), work);
}

/**
 * Runs `work` in one transaction scoped to one tenant (`app.tenant_id` bound) as the connection's
 * own role, not the application role: the deployment's own tools (the CLI), which the database
 * tells apart from the application. Used only where a trigger allows the tables' owner (or a
 * superuser) what it refuses the application role: storing an API key or an outbound endpoint
 * active at once (idem_guard_inactive_insert), a credit without its evidence
 * (idem_check_entry_source), a looser risk rule (idem_guard_risk_policy_write). Row-level
 * security still binds the owner (FORCE).
 * Connected as a login that is neither (the server's), the database refuses that too.
 */
export async function withTenantAsConnection<T>(
  db: Database,
  tenantId: string,
  work: (tx: Tx) => Promise<T>,
): Promise<T> {
  return scopedTransaction(
    db,
    tenantId,
    (tx) => tx.execute(sql`select set_config('app.tenant_id', ${tenantId}, true)`),
    work,
  );
}

/** One transaction whose first statement binds the tenant (`bind`), then `work`; a bad id runs nothing. */
async function scopedTransaction<T>(
  db: Database,
  tenantId: string,
  bind: (tx: Tx) => Promise<unknown>,
  work: (tx: Tx) => Promise<T>,
): Promise<T> {
  if (!tenantIdSchema.safeParse(tenantId).success) {
    throw new IdemError('UNAUTHORIZED', 'tenant id is not a valid identifier');
  }
  return db.transaction(async (tx) => {
    await bind(tx);
    return work(tx);
  });
}
