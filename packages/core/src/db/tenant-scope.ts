import { IdemError } from '@idem/contracts';
import { sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Database, Tx } from './connect.ts';

const tenantIdSchema = z.uuid();

/** The restricted role row-level security binds: neither superuser nor table owner. */
export const APP_ROLE = 'idem_app';

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
  if (!tenantIdSchema.safeParse(tenantId).success) {
    throw new IdemError('UNAUTHORIZED', 'tenant id is not a valid identifier');
  }
  return db.transaction(async (tx) => {
    await tx.execute(
      sql`select set_config('app.tenant_id', ${tenantId}, true), set_config('role', ${APP_ROLE}, true)`,
    );
    return work(tx);
  });
}
