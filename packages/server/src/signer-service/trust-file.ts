/**
 * The signer service's trust file (IDEM_SIGNER_TRUST_FILE, docs/SIGNING.md "Chain of trust"): what
 * the service trusts without asking the database, pinned by its operator at bootstrap. Per tenant,
 * the anchor passkeys (credential id, member and public key) every other passkey's trust starts
 * from, the most a withdrawal of each asset may move when the automatic review approved it (no
 * person's assertion), and the fewest person approvals it accepts. The deployment's origins are
 * the relying parties the assertions must have been made for.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { assetCodeSchema, IdemError, minorUnitsSchema } from '@idem/contracts';
import { type Executor, schema } from '@idem/core';
import { and, eq, isNotNull, isNull } from 'drizzle-orm';
import { z } from 'zod';

const base64url = z.string().regex(/^[A-Za-z0-9_-]+$/, { error: 'base64url' });

const pinnedPasskeySchema = z.strictObject({
  credentialId: base64url.max(1400),
  userId: z.uuid(),
  /** The credential's COSE public key, base64url, as registered. */
  publicKey: base64url.max(4096),
});

const tenantTrustSchema = z.strictObject({
  anchors: z.array(pinnedPasskeySchema),
  /** Per asset: the most an automatically approved withdrawal moves; absent: none without people. */
  autoApproveMaxMinor: z.record(assetCodeSchema, minorUnitsSchema),
  /** The fewest verified person approvals a withdrawal above that needs (and a passkey registration). */
  minApprovals: z.number().int().min(1).max(10),
});

export const trustFileSchema = z.strictObject({
  version: z.literal(1),
  /** The staff screens' origins (IDEM_PUBLIC_URL): assertions made for another site do not count. */
  origins: z.array(z.url()).min(1),
  tenants: z.record(z.uuid(), tenantTrustSchema),
});
export type TrustFile = z.infer<typeof trustFileSchema>;
export type TenantTrust = z.infer<typeof tenantTrustSchema>;

export function readTrustFile(path: string): TrustFile {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new IdemError(
      'VALIDATION',
      `the trust file ${path} is not readable JSON: ${(error as Error).message}`,
    );
  }
  const parsed = trustFileSchema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new IdemError('VALIDATION', `the trust file ${path} is malformed: ${issues}`);
  }
  return parsed.data;
}

/**
 * What `idem signer pin` writes for a tenant at bootstrap, read from the database while it is still
 * the operator's own: the active passkeys of its active admins as anchors, and the auto-approve
 * limits of its risk rules in force. Run it once, before the database login is shared; later
 * passkeys are trusted through their approved registrations, never by pinning again.
 */
export async function tenantTrustAtBootstrap(
  db: Executor,
  tenantId: string,
  minApprovals = 1,
): Promise<TenantTrust> {
  const anchors = await db
    .select({
      credentialId: schema.staffPasskeys.credentialId,
      userId: schema.staffPasskeys.userId,
      publicKey: schema.staffPasskeys.publicKey,
    })
    .from(schema.staffPasskeys)
    .innerJoin(
      schema.staffUsers,
      and(
        eq(schema.staffUsers.tenantId, schema.staffPasskeys.tenantId),
        eq(schema.staffUsers.userId, schema.staffPasskeys.userId),
      ),
    )
    .where(
      and(
        eq(schema.staffPasskeys.tenantId, tenantId),
        isNotNull(schema.staffPasskeys.activatedAt),
        isNull(schema.staffPasskeys.revokedAt),
        eq(schema.staffUsers.role, 'admin'),
        isNull(schema.staffUsers.disabledAt),
      ),
    )
    .orderBy(schema.staffPasskeys.createdAt);
  const rules = await db
    .select({ asset: schema.riskPolicies.assetCode, max: schema.riskPolicies.autoApproveMaxMinor })
    .from(schema.riskPolicies)
    .where(eq(schema.riskPolicies.tenantId, tenantId));
  return {
    anchors,
    autoApproveMaxMinor: Object.fromEntries(rules.map((rule) => [rule.asset, rule.max])),
    minApprovals,
  };
}

/** Writes the file with `tenantId`'s entry replaced and `origin` added; other tenants are kept. */
export function pinTenant(
  path: string,
  input: { tenantId: string; origin: string; trust: TenantTrust },
  existing: TrustFile | null,
): TrustFile {
  const origin = new URL(input.origin).origin;
  const file: TrustFile = {
    version: 1,
    origins: [...new Set([...(existing?.origins ?? []), origin])],
    tenants: { ...(existing?.tenants ?? {}), [input.tenantId]: input.trust },
  };
  // Parsed again so a pinned file always reads back.
  writeFileSync(path, `${JSON.stringify(trustFileSchema.parse(file), null, 2)}\n`, { mode: 0o600 });
  return file;
}
