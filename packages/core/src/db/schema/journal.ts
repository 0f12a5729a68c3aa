import { sql } from 'drizzle-orm';
import { check, integer, numeric, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

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
  (t) => [primaryKey({ columns: [t.tenantId, t.entryId] }), tenantPolicy()],
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
