import { sql } from 'drizzle-orm';
import { check, index, pgTable, primaryKey, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * API keys. The key itself is shown once and never stored: only its SHA-256 (the key carries 256
 * random bits, so a slow hash adds nothing). The key also names its tenant, so the lookup runs
 * inside that tenant's row-level-security scope and no cross-tenant lookup is ever needed.
 */
export const apiKeys = pgTable(
  'api_keys',
  {
    tenantId: uuid('tenant_id').notNull(),
    keyId: uuid('key_id').notNull(),
    /** Hex SHA-256 of the whole key string. */
    keyHash: text('key_hash').notNull(),
    /** A few leading characters of the secret part, so an operator can tell keys apart. */
    hint: text('hint').notNull(),
    label: text('label').notNull(),
    /**
     * What the key may do (contracts' apiKeyScopes). Keys minted before scopes existed were given
     * every scope, so no integrator broke; a new key names its own.
     */
    scopes: text('scopes').array().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    /**
     * Who minted it: `staff:<user id>`, `cli`, or null for a key older than owners. With the last
     * widener, the staff four eyes refuses on what the key submits.
     */
    createdBy: text('created_by'),
    /** Who last added a scope and when; null until a scope is added. */
    widenedBy: text('widened_by'),
    widenedAt: timestamp('widened_at', { withTimezone: true }),
    /** Past this instant the key authenticates nothing; null: it never expires. Set once, at minting. */
    expiresAt: timestamp('expires_at', { withTimezone: true }),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
    /**
     * When the key began to authenticate. Null while a key minted from the staff screens waits for
     * its control change (another admin's approval and the tenant's delay); the database sets it
     * only through such a change that is approved and due (idem_guard_api_key_update), and once.
     * Keys from the deployment's own tools (the CLI) and keys older than this column are active.
     */
    activatedAt: timestamp('activated_at', { withTimezone: true }).defaultNow(),
    /**
     * When the key last authenticated, to the minute: written at most once a minute per key, on a
     * lookup that misses the server's key cache, so busy keys cost no extra writes.
     */
    lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.keyId] }),
    unique('api_keys_tenant_hash').on(t.tenantId, t.keyHash),
    check(
      'api_keys_scopes_known',
      sql`cardinality(${t.scopes}) between 1 and 4 and ${t.scopes} <@ array['withdraw', 'customer-sessions', 'read', 'webhooks']::text[]`,
    ),
    check('api_keys_widened_together', sql`(${t.widenedBy} is null) = (${t.widenedAt} is null)`),
    tenantPolicy(),
  ],
);

/**
 * Where a source (a custodian, a chain watcher) delivers webhooks. The endpoint id is part of the
 * URL and names the tenant, so intake finds the endpoint inside that tenant's scope. The secret
 * must be kept in clear: HMAC verification needs it (see docs/API.md on protecting it).
 */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    tenantId: uuid('tenant_id').notNull(),
    endpointId: text('endpoint_id').notNull(),
    source: text('source').notNull(),
    /** A Standard Webhooks secret, `whsec_` followed by base64. */
    secret: text('secret').notNull(),
    /**
     * The secret a rotation replaced, still accepted until `previous_secret_until` so the source
     * can switch without a refused delivery; both null outside an overlap.
     */
    previousSecret: text('previous_secret'),
    previousSecretUntil: timestamp('previous_secret_until', { withTimezone: true }),
    rotatedAt: timestamp('rotated_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    disabledAt: timestamp('disabled_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.endpointId] }),
    index('webhook_endpoints_tenant_source').on(t.tenantId, t.source),
    tenantPolicy(),
  ],
);
