import { and, eq } from 'drizzle-orm';
import type { Executor, Tx } from '../db/connect.ts';
import { tenantBranding, tenants } from '../db/schema/index.ts';

export interface Branding {
  displayName: string;
  logoUrl: string | null;
  primaryColor: string;
}

/** Used until an admin sets the tenant's own: the tenant's name on a neutral blue. */
export const DEFAULT_PRIMARY_COLOR = '#1864ab';

/** A tenant's brand, or its name on the default colour when none was set. */
export async function getBranding(db: Executor, tenantId: string): Promise<Branding> {
  const rows = await db.select().from(tenantBranding).where(eq(tenantBranding.tenantId, tenantId));
  const row = rows[0];
  if (row) return { displayName: row.displayName, logoUrl: row.logoUrl, primaryColor: row.primaryColor };
  const tenant = await db.select({ name: tenants.name }).from(tenants).where(eq(tenants.tenantId, tenantId));
  return { displayName: tenant[0]?.name ?? 'Exchange', logoUrl: null, primaryColor: DEFAULT_PRIMARY_COLOR };
}

/** Sets the brand (one row per tenant); the database checks the colour and the logo URL's scheme. */
export async function setBranding(
  tx: Tx,
  input: { tenantId: string; branding: Branding; actor: string },
): Promise<Branding> {
  const values = { ...input.branding, updatedBy: input.actor, updatedAt: new Date() };
  await tx
    .insert(tenantBranding)
    .values({ tenantId: input.tenantId, ...values })
    .onConflictDoUpdate({ target: [tenantBranding.tenantId], set: values });
  const stored = await tx
    .select()
    .from(tenantBranding)
    .where(and(eq(tenantBranding.tenantId, input.tenantId)));
  const row = stored[0];
  if (!row) throw new Error('setBranding: the row just written is not visible');
  return { displayName: row.displayName, logoUrl: row.logoUrl, primaryColor: row.primaryColor };
}
