import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { IdemError } from '@idem/contracts';
import { and, eq, isNull, sql } from 'drizzle-orm';
import type { Database } from '../db/connect.ts';
import { apiKeys } from '../db/schema/index.ts';
import { withTenant } from '../db/tenant-scope.ts';

/**
 * An API key is `idem_<tenant id, 32 hex>_<secret, 43 base64url chars = 256 random bits>`. The
 * tenant part is not a secret: it lets authentication run inside that tenant's row-level-security
 * scope, so no query ever has to look across tenants to find a key. The secret is what proves.
 */
const API_KEY_PATTERN = /^idem_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;
export const API_KEY_SECRET_BYTES = 32;

export interface ParsedApiKey {
  tenantId: string;
  keyHash: string;
}

export function hashApiKey(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex');
}

/** Reads the tenant out of a key's shape, or null for anything that is not an Idem key. */
export function parseApiKey(apiKey: string): ParsedApiKey | null {
  const match = API_KEY_PATTERN.exec(apiKey);
  const hex = match?.[1];
  if (!hex) return null;
  const tenantId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { tenantId, keyHash: hashApiKey(apiKey) };
}

/** Mints a key for a tenant. The returned `apiKey` is shown once; only its hash is stored. */
export async function createApiKey(
  db: Database,
  tenantId: string,
  options: { label?: string } = {},
): Promise<{ keyId: string; apiKey: string }> {
  const secret = randomBytes(API_KEY_SECRET_BYTES).toString('base64url');
  const apiKey = `idem_${tenantId.replaceAll('-', '').toLowerCase()}_${secret}`;
  const keyId = randomUUID();
  const label = (options.label ?? 'default').slice(0, 120);
  await withTenant(db, tenantId, async (tx) => {
    await tx
      .insert(apiKeys)
      .values({ tenantId, keyId, keyHash: hashApiKey(apiKey), hint: secret.slice(0, 4), label });
  });
  return { keyId, apiKey };
}

/** Revokes a key by its id. Revocation is final; a revoked key authenticates nothing. */
export async function revokeApiKey(db: Database, tenantId: string, keyId: string): Promise<void> {
  const revoked = await withTenant(db, tenantId, (tx) =>
    tx
      .update(apiKeys)
      .set({ revokedAt: sql`now()` })
      .where(and(eq(apiKeys.tenantId, tenantId), eq(apiKeys.keyId, keyId), isNull(apiKeys.revokedAt)))
      .returning({ keyId: apiKeys.keyId }),
  );
  if (revoked.length === 0) throw new IdemError('NOT_FOUND', 'no active API key with that id');
}

/**
 * The tenant an API key belongs to, checked inside that tenant's scope. Any failure is the same
 * UNAUTHORIZED, so a caller learns nothing about which part was wrong.
 */
export async function authenticateApiKey(
  db: Database,
  apiKey: string,
): Promise<{ tenantId: string; keyId: string }> {
  const parsed = parseApiKey(apiKey);
  if (!parsed) throw new IdemError('UNAUTHORIZED', 'missing, unknown or revoked API key');
  const rows = await withTenant(db, parsed.tenantId, (tx) =>
    tx
      .select({ keyId: apiKeys.keyId })
      .from(apiKeys)
      .where(
        and(
          eq(apiKeys.tenantId, parsed.tenantId),
          eq(apiKeys.keyHash, parsed.keyHash),
          isNull(apiKeys.revokedAt),
        ),
      ),
  );
  const found = rows[0];
  if (!found) throw new IdemError('UNAUTHORIZED', 'missing, unknown or revoked API key');
  return { tenantId: parsed.tenantId, keyId: found.keyId };
}
