import { createHash, randomBytes, randomUUID } from 'node:crypto';
import {
  type ApiKeyScope,
  type ApiKeyView,
  apiKeyScopeSetSchema,
  apiKeyScopes,
  IdemError,
} from '@idem/contracts';
import { and, asc, eq, isNotNull, isNull, or, sql } from 'drizzle-orm';
import type { Database, Tx } from '../db/connect.ts';
import { apiKeys, staffUsers } from '../db/schema/index.ts';
import { withTenant, withTenantAsConnection } from '../db/tenant-scope.ts';
import { parseOrThrow, validation } from '../operations/input-validation.ts';
import { staffActor } from '../staff/users.ts';

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

/** What minting a key needs: who mints it is recorded, so four eyes can refuse them later. */
export interface MintApiKeyInput {
  label?: string;
  scopes: readonly ApiKeyScope[];
  /** Null or absent: the key never expires. Must lie in the future. */
  expiresAt?: Date | null;
  /** Who mints it: `staff:<user id>`, `cli`, or a test's name. */
  createdBy: string;
  /**
   * Stored inactive: it authenticates nothing until an approved `api_key_create` control change
   * activates it (the staff screens in quorum mode). Absent: active at once, which the database
   * allows only the deployment's own tools (createApiKey as the tables' owner; idem_guard_inactive_insert).
   */
  inactive?: boolean;
}

/** Every scope, in their documented order: the CLI's and the test fixtures' default. */
export const ALL_API_KEY_SCOPES: readonly ApiKeyScope[] = apiKeyScopes;

/** The actor an API key's requests are recorded under, in a withdrawal's history. */
export function apiKeyActor(keyId: string): string {
  return `apikey:${keyId}`;
}

/** The key id behind an `apikey:` actor, or null for any other actor. */
export function keyIdOfActor(actor: string): string | null {
  return actor.startsWith('apikey:') ? actor.slice('apikey:'.length) : null;
}

/** A scope set checked against the contract and put in the documented order. */
function scopeSet(scopes: readonly ApiKeyScope[]): ApiKeyScope[] {
  const parsed = parseOrThrow(apiKeyScopeSetSchema, scopes);
  return apiKeyScopes.filter((scope) => parsed.includes(scope));
}

/**
 * Mints a key inside the caller's transaction (the tenant's scope), so a wrapper (a proposal that
 * a second admin approves) can run it where it likes. The returned `apiKey` is shown once; only
 * its hash is stored.
 */
export async function mintApiKey(
  tx: Tx,
  tenantId: string,
  input: MintApiKeyInput,
): Promise<{ keyId: string; apiKey: string; scopes: ApiKeyScope[]; expiresAt: Date | null }> {
  const scopes = scopeSet(input.scopes);
  const expiresAt = input.expiresAt ?? null;
  if (expiresAt && expiresAt.getTime() <= Date.now()) {
    throw validation('expiresAt', 'the expiry must lie in the future');
  }
  const secret = randomBytes(API_KEY_SECRET_BYTES).toString('base64url');
  const apiKey = `idem_${tenantId.replaceAll('-', '').toLowerCase()}_${secret}`;
  const keyId = randomUUID();
  const label = (input.label ?? 'default').slice(0, 120);
  await tx.insert(apiKeys).values({
    tenantId,
    keyId,
    keyHash: hashApiKey(apiKey),
    hint: secret.slice(0, 4),
    label,
    scopes,
    createdBy: input.createdBy,
    expiresAt,
    ...(input.inactive ? { activatedAt: null } : {}),
  });
  return { keyId, apiKey, scopes, expiresAt };
}

/**
 * The deployment's own tools (the CLI's `apikey create`, `tenant create`; fixtures): mints a key in
 * its own transaction as the connection's role, active unless `inactive`. The database stores an
 * active key only for the tables' owner or a superuser (idem_guard_inactive_insert), never for the
 * application role the staff screens run as: run the CLI with the owner's DATABASE_URL.
 */
export function createApiKey(
  db: Database,
  tenantId: string,
  input: MintApiKeyInput,
): Promise<{ keyId: string; apiKey: string; scopes: ApiKeyScope[]; expiresAt: Date | null }> {
  return withTenantAsConnection(db, tenantId, (tx) => mintApiKey(tx, tenantId, input));
}

/**
 * Replaces an active key's scopes. Adding any scope records `actor` as the key's last widener
 * (four eyes then refuses them on what the key submits); removing scopes records nothing new. The
 * database refuses a widening that does not name its widener (idem_guard_api_key_update).
 */
export async function setApiKeyScopes(
  tx: Tx,
  tenantId: string,
  input: { keyId: string; scopes: readonly ApiKeyScope[]; actor: string },
): Promise<{ keyId: string; scopes: ApiKeyScope[]; widened: boolean }> {
  const scopes = scopeSet(input.scopes);
  const [current] = await tx
    .select({ scopes: apiKeys.scopes })
    .from(apiKeys)
    .where(and(eq(apiKeys.tenantId, tenantId), eq(apiKeys.keyId, input.keyId), isNull(apiKeys.revokedAt)))
    .for('update');
  if (!current) throw new IdemError('NOT_FOUND', 'no active API key with that id');
  const widened = scopes.some((scope) => !current.scopes.includes(scope));
  await tx
    .update(apiKeys)
    .set({ scopes, ...(widened ? { widenedBy: input.actor, widenedAt: sql`clock_timestamp()` } : {}) })
    .where(and(eq(apiKeys.tenantId, tenantId), eq(apiKeys.keyId, input.keyId)));
  return { keyId: input.keyId, scopes, widened };
}

/**
 * Activates a key minted inactive: the apply step of its approved `api_key_create` control change.
 * The database refuses it outside such a change (idem_guard_api_key_update). A key revoked while it
 * waited stays revoked (INVALID_TRANSITION: the change is refused, nothing applies).
 */
export async function activateApiKey(tx: Tx, tenantId: string, keyId: string): Promise<{ keyId: string }> {
  const [row] = await tx
    .update(apiKeys)
    .set({ activatedAt: sql`now()` })
    .where(
      and(
        eq(apiKeys.tenantId, tenantId),
        eq(apiKeys.keyId, keyId),
        isNull(apiKeys.revokedAt),
        isNull(apiKeys.activatedAt),
      ),
    )
    .returning({ keyId: apiKeys.keyId });
  if (!row) throw new IdemError('INVALID_TRANSITION', 'the key was revoked or is already active');
  return row;
}

/** The staff who answer for what a key does: its minter and its last widener, where recorded. */
export async function apiKeyOwners(tx: Tx, tenantId: string, keyId: string): Promise<string[]> {
  const [row] = await tx
    .select({ createdBy: apiKeys.createdBy, widenedBy: apiKeys.widenedBy })
    .from(apiKeys)
    .where(and(eq(apiKeys.tenantId, tenantId), eq(apiKeys.keyId, keyId)));
  return [row?.createdBy, row?.widenedBy].filter((owner): owner is string => typeof owner === 'string');
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
export interface AuthenticatedApiKey {
  tenantId: string;
  keyId: string;
  scopes: ApiKeyScope[];
  /** Past this the key is refused; a cache must not answer for it beyond this instant. */
  expiresAt: Date | null;
}

const refusedKey = () => new IdemError('UNAUTHORIZED', 'missing, unknown, revoked or expired API key');

export async function authenticateApiKey(db: Database, apiKey: string): Promise<AuthenticatedApiKey> {
  const parsed = parseApiKey(apiKey);
  if (!parsed) throw refusedKey();
  const found = await withTenant(db, parsed.tenantId, async (tx) => {
    const [row] = await tx
      .select({
        keyId: apiKeys.keyId,
        scopes: apiKeys.scopes,
        expiresAt: apiKeys.expiresAt,
        stale: sql<boolean>`${apiKeys.lastUsedAt} is null or ${apiKeys.lastUsedAt} < now() - ${LAST_USE_RESOLUTION}::interval`,
      })
      .from(apiKeys)
      .where(
        and(
          eq(apiKeys.tenantId, parsed.tenantId),
          eq(apiKeys.keyHash, parsed.keyHash),
          isNull(apiKeys.revokedAt),
          // A key waiting for another admin's approval authenticates nothing.
          isNotNull(apiKeys.activatedAt),
          // An expired key is refused like a revoked one, on the database's clock.
          or(isNull(apiKeys.expiresAt), sql`${apiKeys.expiresAt} > now()`),
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
  if (!found) throw refusedKey();
  return {
    tenantId: parsed.tenantId,
    keyId: found.keyId,
    scopes: found.scopes as ApiKeyScope[],
    expiresAt: found.expiresAt,
  };
}

const LAST_USE_RESOLUTION = '1 minute';

/**
 * The tenant's keys, oldest first, for the staff screen: label, a prefix to tell them apart (the
 * tenant part and the first characters of the secret, never the secret), scopes, who minted and
 * last widened it (with their e-mails), expiry, created, last used, revoked, activated. Read in the tenant's
 * scope.
 */
export async function listApiKeys(tx: Tx, tenantId: string): Promise<ApiKeyView[]> {
  const rows = await tx
    .select()
    .from(apiKeys)
    .where(eq(apiKeys.tenantId, tenantId))
    .orderBy(asc(apiKeys.createdAt), asc(apiKeys.keyId));
  const staff = await tx
    .select({ userId: staffUsers.userId, email: staffUsers.email })
    .from(staffUsers)
    .where(eq(staffUsers.tenantId, tenantId));
  const emailOf = new Map(staff.map((member) => [staffActor(member.userId), member.email]));
  const email = (actor: string | null) => (actor === null ? null : (emailOf.get(actor) ?? null));
  return rows.map((row) => ({
    keyId: row.keyId,
    label: row.label,
    prefix: `idem_${row.tenantId.replaceAll('-', '').toLowerCase()}_${row.hint}`,
    scopes: row.scopes as ApiKeyScope[],
    createdAt: row.createdAt.toISOString(),
    createdBy: row.createdBy,
    createdByEmail: email(row.createdBy),
    widenedBy: row.widenedBy,
    widenedByEmail: email(row.widenedBy),
    widenedAt: row.widenedAt?.toISOString() ?? null,
    expiresAt: row.expiresAt?.toISOString() ?? null,
    lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
    revokedAt: row.revokedAt?.toISOString() ?? null,
    activatedAt: row.activatedAt?.toISOString() ?? null,
  }));
}
