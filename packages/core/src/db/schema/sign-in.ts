import { sql } from 'drizzle-orm';
import { check, index, integer, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * Failed staff sign-ins per (tenant, e-mail), shared by every server process (I11-F7). The e-mail
 * is stored only as the SHA-256 of tenant and normalised address (personal data). A window ends at
 * `expires_at`; only a row past it is ever cleaned up. Written and read only through the
 * idem_sign_in_* functions (core/sql/idem_sign_in_take.sql, idem_sign_in_succeeded.sql), never
 * by the application role directly.
 */
export const signInFailures = pgTable(
  'sign_in_failures',
  {
    tenantId: uuid('tenant_id').notNull(),
    accountHash: text('account_hash').notNull(),
    failures: integer('failures').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.accountHash] }),
    index('sign_in_failures_expires').on(t.expiresAt),
    check('sign_in_failures_hash', sql`${t.accountHash} ~ '^[0-9a-f]{64}$'`),
    check('sign_in_failures_count', sql`${t.failures} >= 0`),
    tenantPolicy(),
  ],
);

/**
 * Sign-in attempts per client address, across tenants: one address guessing in many tenants is
 * one budget. Holds no tenant data (a SHA-256 of the address and a count), so it has no tenant_id;
 * only the idem_sign_in_* functions' owner may touch it.
 */
export const signInAddressFailures = pgTable(
  'sign_in_address_failures',
  {
    addressHash: text('address_hash').primaryKey(),
    failures: integer('failures').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [
    index('sign_in_address_failures_expires').on(t.expiresAt),
    check('sign_in_address_failures_hash', sql`${t.addressHash} ~ '^[0-9a-f]{64}$'`),
    check('sign_in_address_failures_count', sql`${t.failures} >= 0`),
  ],
).enableRLS();
