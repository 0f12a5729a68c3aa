import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';
import { assets } from './tenants.ts';

/**
 * The projection of customer postings per (tenant, account, asset). numeric(78,0) because an
 * 18-decimal asset overflows bigint. Both buckets are kept non-negative by the database (C08);
 * they are written only by the database's trigger on postings (core/sql/idem_apply_postings.sql),
 * never by the application role, so they always equal the postings that explain them.
 */
export const balances = pgTable(
  'balances',
  {
    tenantId: uuid('tenant_id').notNull(),
    accountRef: text('account_ref').notNull(),
    assetCode: text('asset_code').notNull(),
    available: numeric('available', { precision: 78, scale: 0 }).notNull().default('0'),
    held: numeric('held', { precision: 78, scale: 0 }).notNull().default('0'),
    version: bigint('version', { mode: 'number' }).notNull().default(0),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.accountRef, t.assetCode] }),
    foreignKey({ columns: [t.tenantId, t.assetCode], foreignColumns: [assets.tenantId, assets.code] }),
    check('balances_available_non_negative', sql`${t.available} >= 0`),
    check('balances_held_non_negative', sql`${t.held} >= 0`),
    tenantPolicy(),
  ],
);
