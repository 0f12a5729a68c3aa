import { randomUUID } from 'node:crypto';
import { IdemError, networkSchema } from '@idem/contracts';
import { sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Database } from '../db/connect.ts';
import { assets, tenants } from '../db/schema/index.ts';

export const assetConfigSchema = z.strictObject({
  code: z.string().regex(/^[A-Z0-9]{2,12}$/),
  network: networkSchema,
  decimals: z.number().int().min(0).max(36),
  confirmations: z.number().int().min(1).max(10_000),
  contractAddress: z.string().nullable().optional(),
  /** How long a timing break may stay open before it escalates (C21); one hour when omitted. */
  reconciliationWindowSeconds: z.number().int().min(1).max(604_800).optional(),
});
export type AssetConfig = z.infer<typeof assetConfigSchema>;

/** The assets a new tenant starts with. Depths follow common exchange practice. */
export const DEFAULT_ASSETS: AssetConfig[] = [
  { code: 'BTC', network: 'bitcoin', decimals: 8, confirmations: 3 },
  { code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 12 },
  { code: 'USDC', network: 'ethereum', decimals: 6, confirmations: 12 },
];

/**
 * Provisions a tenant and its assets. An administrative path: it runs as the connection's own
 * (owner) role, but still inside the new tenant's scope, so FORCE ROW LEVEL SECURITY's check
 * applies to what it writes.
 */
export async function createTenant(
  db: Database,
  input: {
    name: string;
    assets?: AssetConfig[];
    tenantId?: string;
    /** The custodian account its custodian-routed assets are held in (default 'omnibus', shared). */
    custodianAccount?: string;
  },
): Promise<{ tenantId: string }> {
  const name = input.name.trim();
  if (name.length < 1 || name.length > 120)
    throw new IdemError('VALIDATION', 'tenant name must be 1..120 characters');
  const assetList = z
    .array(assetConfigSchema)
    .max(100)
    .parse(input.assets ?? DEFAULT_ASSETS);
  const custodianAccount = z
    .string()
    .regex(/^[a-z0-9_-]{1,64}$/, { error: 'custodian account: 1..64 of a-z, 0-9, _ and -' })
    .optional()
    .parse(input.custodianAccount);
  const tenantId = input.tenantId ?? randomUUID();
  await db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('app.tenant_id', ${tenantId}, true)`);
    await tx.insert(tenants).values({ tenantId, name, ...(custodianAccount ? { custodianAccount } : {}) });
    if (assetList.length > 0) {
      await tx.insert(assets).values(
        assetList.map((asset) => ({
          tenantId,
          code: asset.code,
          network: asset.network,
          decimals: asset.decimals,
          confirmations: asset.confirmations,
          contractAddress: asset.contractAddress ?? null,
          ...(asset.reconciliationWindowSeconds === undefined
            ? {}
            : { reconciliationWindowSeconds: asset.reconciliationWindowSeconds }),
        })),
      );
    }
  });
  return { tenantId };
}
