import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  index,
  integer,
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
 * Double-entry journal. Postings carry signed amounts in the liability-normal sign: a customer
 * credit is positive, the custody control account (what we hold) is its negative mirror. Every
 * entry sums to zero per asset, checked by a deferred trigger at commit; UPDATE and DELETE are
 * refused by triggers. Corrections are new entries.
 */
export const journalEntries = pgTable(
  'journal_entries',
  {
    tenantId: uuid('tenant_id').notNull(),
    entryId: uuid('entry_id').notNull(),
    operationId: uuid('operation_id').notNull(),
    /** hold, release, settle, unsettle, credit, debit, reversal */
    kind: text('kind').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.entryId] }),
    // An operation's entries: the database's own checks read them (a withdrawal approved only while
    // its hold exists, a credit posted once; core/sql/idem_guard_operation_state.sql).
    index('journal_entries_operation').on(t.tenantId, t.operationId),
    tenantPolicy(),
  ],
);

export const postings = pgTable(
  'postings',
  {
    tenantId: uuid('tenant_id').notNull(),
    entryId: uuid('entry_id').notNull(),
    postingNo: integer('posting_no').notNull(),
    /** A customer account reference, or a system account such as '@custody'. */
    account: text('account').notNull(),
    /** available | held for customer accounts; control for system accounts. */
    bucket: text('bucket').notNull(),
    assetCode: text('asset_code').notNull(),
    amount: numeric('amount', { precision: 78, scale: 0 }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.entryId, t.postingNo] }),
    check('postings_amount_non_zero', sql`${t.amount} <> 0`),
    check('postings_bucket_known', sql`${t.bucket} in ('available', 'held', 'control')`),
    check('postings_system_accounts_use_control', sql`(${t.account} like '@%') = (${t.bucket} = 'control')`),
    tenantPolicy(),
  ],
);

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
