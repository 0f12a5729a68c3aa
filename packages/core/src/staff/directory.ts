import { sql } from 'drizzle-orm';
import { withAppRole } from '../db/app-role.ts';
import type { Database } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';

/**
 * The two cross-tenant look-ups staff sign-in needs (I14-SIGNIN), each through a narrow
 * SECURITY DEFINER function (docs/SERIALIZATION.md, "Beyond one primary"), run as the application
 * role, which can read neither the slug directory nor another tenant's staff itself.
 */

/** The tenant of an organisation slug, or null. */
export async function tenantForSlug(db: Database, slug: string): Promise<string | null> {
  return withAppRole(db, async (tx) => {
    const [row] = rowsOf<{ tenant_id: string | null }>(
      await tx.execute(sql`select idem_tenant_for_slug(${slug})::text as tenant_id`),
    );
    return row?.tenant_id ?? null;
  });
}

/** The tenants where the e-mail is active staff: at most two, which is all sign-in needs to know. */
export async function staffTenantsForEmail(db: Database, email: string): Promise<string[]> {
  return withAppRole(db, async (tx) => {
    return rowsOf<{ tenant_id: string }>(
      await tx.execute(sql`select tenant_id::text from idem_staff_tenants_for_email(${email})`),
    ).map((row) => row.tenant_id);
  });
}
