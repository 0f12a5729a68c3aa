import { randomBytes, randomUUID } from 'node:crypto';
import { assetCodeSchema, IdemError, networkSchema, organisationSlugSchema } from '@idem/contracts';
import { eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Database } from '../db/connect.ts';
import { assets, tenantSlugs, tenants } from '../db/schema/index.ts';

export const assetConfigSchema = z.strictObject({
  code: assetCodeSchema,
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
    /** The organisation slug staff sign in with; derived from the name when omitted. */
    slug?: string;
    /**
     * TOTP for approvers, operators and admins. On by default; the embedded demo and the
     * test fixtures turn it off.
     */
    mfaRequired?: boolean;
    /** How long a verified code allows step-up actions (30..3600 s; 300 when omitted). */
    mfaFreshSeconds?: number;
    /** How long a member who joined or changed role waits before approving (default 24 hours). */
    approverCoolingOffSeconds?: number;
  },
): Promise<{ tenantId: string; slug: string }> {
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
  const given = input.slug === undefined ? null : organisationSlugSchema.safeParse(input.slug);
  if (given && !given.success)
    throw new IdemError('VALIDATION', 'organisation slug: 1..48 of a-z, 0-9 and inner hyphens');
  const tenantId = input.tenantId ?? randomUUID();
  let slug = given?.data ?? slugFromName(name);
  await db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('app.tenant_id', ${tenantId}, true)`);
    await tx.insert(tenants).values({
      tenantId,
      name,
      ...(custodianAccount ? { custodianAccount } : {}),
      ...(input.mfaRequired === undefined ? {} : { mfaRequired: input.mfaRequired }),
      ...(input.mfaFreshSeconds === undefined ? {} : { mfaFreshSeconds: input.mfaFreshSeconds }),
      ...(input.approverCoolingOffSeconds === undefined
        ? {}
        : { approverCoolingOffSeconds: input.approverCoolingOffSeconds }),
    });
    // The slug directory is global (not tenant-scoped): a taken derived slug gets a random suffix,
    // a taken slug that was asked for is refused.
    for (let attempt = 0; ; attempt += 1) {
      const claimed = await tx
        .insert(tenantSlugs)
        .values({ slug, tenantId })
        .onConflictDoNothing()
        .returning({ slug: tenantSlugs.slug });
      if (claimed.length > 0) break;
      if (given || attempt >= 5)
        throw new IdemError('IDEMPOTENCY_CONFLICT', `the organisation slug ${slug} is taken`);
      slug = `${slugFromName(name).slice(0, 40)}-${randomBytes(4).readUInt32BE().toString(36)}`;
    }
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
  return { tenantId, slug };
}

/**
 * Changes a tenant's TOTP settings: whether approvers, operators and admins must use it,
 * and the step-up window (30..3600 s). An administrative path, like createTenant: the application
 * role may not update tenants.
 */
export async function setTenantMfa(
  db: Database,
  input: { tenantId: string; mfaRequired?: boolean; mfaFreshSeconds?: number },
): Promise<{ tenantId: string; mfaRequired: boolean; mfaFreshSeconds: number }> {
  const fresh = input.mfaFreshSeconds;
  if (fresh !== undefined && (!Number.isInteger(fresh) || fresh < 30 || fresh > 3600))
    throw new IdemError('VALIDATION', 'the step-up window is 30..3600 seconds');
  return db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('app.tenant_id', ${input.tenantId}, true)`);
    const [row] = await tx
      .update(tenants)
      .set({
        ...(input.mfaRequired === undefined ? {} : { mfaRequired: input.mfaRequired }),
        ...(fresh === undefined ? {} : { mfaFreshSeconds: fresh }),
      })
      .where(eq(tenants.tenantId, input.tenantId))
      .returning({ mfaRequired: tenants.mfaRequired, mfaFreshSeconds: tenants.mfaFreshSeconds });
    if (!row) throw new IdemError('NOT_FOUND', 'no such tenant');
    return { tenantId: input.tenantId, ...row };
  });
}

/** The longest cooling-off period a tenant may set: 30 days. */
export const COOLING_OFF_SECONDS_MAX = 30 * 24 * 3_600;

/**
 * Sets how long a member who joined or changed role waits before their approvals count (0 to 30
 * days; 24 hours by default). An administrative path, like createTenant: the application role may
 * not update tenants, so no staff member can shorten their own wait. Members already cooling off
 * keep the end they were given; the new period applies from the next change.
 */
export async function setApproverCoolingOff(
  db: Database,
  input: { tenantId: string; seconds: number },
): Promise<{ tenantId: string; approverCoolingOffSeconds: number }> {
  const { seconds } = input;
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > COOLING_OFF_SECONDS_MAX)
    throw new IdemError('VALIDATION', `the cooling-off period is 0..${COOLING_OFF_SECONDS_MAX} seconds`);
  return db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('app.tenant_id', ${input.tenantId}, true)`);
    const [row] = await tx
      .update(tenants)
      .set({ approverCoolingOffSeconds: seconds })
      .where(eq(tenants.tenantId, input.tenantId))
      .returning({ approverCoolingOffSeconds: tenants.approverCoolingOffSeconds });
    if (!row) throw new IdemError('NOT_FOUND', 'no such tenant');
    return { tenantId: input.tenantId, ...row };
  });
}

/** `South Exchange Ltd.` becomes `south-exchange-ltd`; a name with no letter or digit becomes `org`. */
export function slugFromName(name: string): string {
  const slug = name
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, 40)
    .replace(/^-+|-+$/g, '');
  return slug === '' ? 'org' : slug;
}
