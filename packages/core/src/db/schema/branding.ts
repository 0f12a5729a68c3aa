import { sql } from 'drizzle-orm';
import { check, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/** How the customer screens look for one tenant: one deployment, many operators' brands. */
export const tenantBranding = pgTable(
  'tenant_branding',
  {
    tenantId: uuid('tenant_id').notNull(),
    displayName: text('display_name').notNull(),
    logoUrl: text('logo_url'),
    primaryColor: text('primary_color').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    updatedBy: text('updated_by').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId] }),
    check('tenant_branding_color_hex', sql`${t.primaryColor} ~ '^#[0-9a-fA-F]{6}$'`),
    check('tenant_branding_logo_https', sql`${t.logoUrl} is null or ${t.logoUrl} ~ '^https://'`),
    tenantPolicy(),
  ],
);

/**
 * The operator's block explorer per network (I14-LIVE): an https URL template with `{txHash}`,
 * turned into the link on a customer's withdrawal. One row per tenant and network; no row, no link.
 * The database repeats the https and placeholder rule, so no other writer can store a
 * `javascript:` link that the customer screens would render.
 */
export const tenantNetworkExplorers = pgTable(
  'tenant_network_explorers',
  {
    tenantId: uuid('tenant_id').notNull(),
    network: text('network').notNull(),
    txUrlTemplate: text('tx_url_template').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    updatedBy: text('updated_by').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.network] }),
    check(
      'tenant_network_explorers_template',
      sql`${t.txUrlTemplate} ~ '^https://[^\\s]*\\{txHash\\}' and length(${t.txUrlTemplate}) <= 300`,
    ),
    tenantPolicy(),
  ],
);
