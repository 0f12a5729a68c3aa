import { IdemError } from '@idem/contracts';
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
  if (!tenantIdSchema.safeParse(tenantId).success) {
    throw new IdemError('UNAUTHORIZED', 'tenant id is not a valid identifier');
  }
  return db.transaction(async (tx) => {
    await actAsAppRole(tx, tenantId);
    return work(tx);
  });
}
