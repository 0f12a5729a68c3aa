import { sql } from 'drizzle-orm';
import { boolean, check, integer, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

export const tenants = pgTable(
  'tenants',
  {
    tenantId: uuid('tenant_id').notNull(),
    name: text('name').notNull(),
    /** Bumped when a tenant's risk or approval policy changes; part of every payload hash (C02). */
    policyVersion: integer('policy_version').notNull().default(1),
    /**
     * The custodian account holding this tenant's custodian-routed assets (bitcoin). Tenants with
     * the same name share one (omnibus) account, reconciled once against the sum of their ledgers.
     * The deployment has one custodian connection (IDEM_CUSTODIAN_URL), named 'omnibus' by default.
     */
    custodianAccount: text('custodian_account').notNull().default('omnibus'),
    /**
     * Whether approvers, operators and admins must use TOTP. On unless the tenant was
     * created without it (the embedded demo, the test fixtures); staff who enrolled anyway always
     * use it.
     */
    mfaRequired: boolean('mfa_required').notNull().default(true),
    /** How long a verified code lets a session approve, resolve, cancel or configure (step-up). */
    mfaFreshSeconds: integer('mfa_fresh_seconds').notNull().default(300),
    /**
     * How long a member who joined or whose role changed waits before their approvals count, so an
     * admin cannot make a second "person" and approve with it at once (24 hours by default).
     */
    approverCoolingOffSeconds: integer('approver_cooling_off_seconds').notNull().default(86_400),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId] }),
    check('tenants_custodian_account_shape', sql`${t.custodianAccount} ~ '^[a-z0-9_-]{1,64}$'`),
    check('tenants_mfa_fresh_range', sql`${t.mfaFreshSeconds} between 30 and 3600`),
    check('tenants_cooling_off_range', sql`${t.approverCoolingOffSeconds} between 0 and 2592000`),
    tenantPolicy(),
  ],
);

/**
 * The organisation slugs staff type at sign-in, unique across the deployment. A directory across
 * tenants, so it is not keyed by tenant (a reference table on Citus, docs/SERIALIZATION.md): the
 * application role has no privilege on it, and reads it only through `idem_tenant_for_slug`.
 */
export const tenantSlugs = pgTable(
  'tenant_slugs',
  {
    slug: text('slug').primaryKey(),
    tenantId: uuid('tenant_id').notNull().unique('tenant_slugs_tenant'),
  },
  // The tenant policy too: provisioning writes a tenant's own slug inside that tenant's scope.
  (t) => [
    check('tenant_slugs_shape', sql`${t.slug} ~ '^[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?$'`),
    tenantPolicy(),
  ],
);

export const assets = pgTable(
  'assets',
  {
    tenantId: uuid('tenant_id').notNull(),
    code: text('code').notNull(),
    network: text('network').notNull(),
    decimals: integer('decimals').notNull(),
    /** Blocks (or the custodian's equivalent) before a transfer counts as confirmed (C17). */
    confirmations: integer('confirmations').notNull(),
    /** The token contract on EVM networks; null for a network's native asset. */
    contractAddress: text('contract_address'),
    /**
     * How long a difference between the ledger and the rail may last as a `timing` break before
     * reconciliation escalates it to `genuine_variance` (C21). Default one hour.
     */
    reconciliationWindowSeconds: integer('reconciliation_window_seconds').notNull().default(3600),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.code] }),
    check('assets_decimals_range', sql`${t.decimals} between 0 and 36`),
    check('assets_confirmations_positive', sql`${t.confirmations} >= 1`),
    check('assets_network_known', sql`${t.network} in ('bitcoin', 'ethereum')`),
    check('assets_reconciliation_window_range', sql`${t.reconciliationWindowSeconds} between 1 and 604800`),
    tenantPolicy(),
  ],
);
