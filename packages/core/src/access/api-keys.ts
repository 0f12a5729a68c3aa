import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { type ApiKeyView, IdemError } from '@idem/contracts';
import { and, asc, eq, isNull, sql } from 'drizzle-orm';
import type { Database, Tx } from '../db/connect.ts';
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
  const found = await withTenant(db, parsed.tenantId, async (tx) => {
    const [row] = await tx
      .select({
        keyId: apiKeys.keyId,
        stale: sql<boolean>`${apiKeys.lastUsedAt} is null or ${apiKeys.lastUsedAt} < now() - ${LAST_USE_RESOLUTION}::interval`,
      })
      .from(apiKeys)
      .where(
        and(
          eq(apiKeys.tenantId, parsed.tenantId),
          eq(apiKeys.keyHash, parsed.keyHash),
          isNull(apiKeys.revokedAt),
        ),
      );
    // The last use is kept to the minute: at most one write per key a minute, and none at all
    // while the server's key cache answers (server/src/auth/api-key-cache.ts).
    if (row?.stale) {
      await tx
        .update(apiKeys)
        .set({ lastUsedAt: sql`now()` })
        .where(and(eq(apiKeys.tenantId, parsed.tenantId), eq(apiKeys.keyId, row.keyId)));
    }
    return row;
  });
  if (!found) throw new IdemError('UNAUTHORIZED', 'missing, unknown or revoked API key');
  return { tenantId: parsed.tenantId, keyId: found.keyId };
}

const LAST_USE_RESOLUTION = '1 minute';

/**
 * The tenant's keys, oldest first, for the staff screen: label, a prefix to tell them apart (the
 * tenant part and the first characters of the secret, never the secret), created, last used,
 * revoked. Read in the tenant's scope.
 */
export async function listApiKeys(tx: Tx, tenantId: string): Promise<ApiKeyView[]> {
  const rows = await tx
    .select()
    .from(apiKeys)
    .where(eq(apiKeys.tenantId, tenantId))
    .orderBy(asc(apiKeys.createdAt), asc(apiKeys.keyId));
  return rows.map((row) => ({
    keyId: row.keyId,
    label: row.label,
    prefix: `idem_${row.tenantId.replaceAll('-', '').toLowerCase()}_${row.hint}`,
    createdAt: row.createdAt.toISOString(),
    lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
    revokedAt: row.revokedAt?.toISOString() ?? null,
  }));
}
