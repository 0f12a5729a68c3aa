import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * One row per staff decision on a withdrawal. Each records the payload hash it approved, so an
 * approval can never cover a payload other than the one stored (C02, C24). Append-only.
 */
export const approvals = pgTable(
  'approvals',
  {
    tenantId: uuid('tenant_id').notNull(),
    operationId: uuid('operation_id').notNull(),
    approver: text('approver').notNull(),
    payloadHash: text('payload_hash').notNull(),
    decision: text('decision').notNull(),
    reason: text('reason'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.operationId, t.approver] }),
    check('approvals_decision_known', sql`${t.decision} in ('approve', 'reject')`),
    tenantPolicy(),
  ],
);

/**
 * A tenant's risk rules per asset. A match sends a withdrawal to review; it never merges or drops
 * it (C06). Amounts are minor units.
 */
export const riskPolicies = pgTable(
  'risk_policies',
  {
    tenantId: uuid('tenant_id').notNull(),
    assetCode: text('asset_code').notNull(),
    /** Up to this amount, a withdrawal with no risk flag is approved by the system. */
    autoApproveMaxMinor: numeric('auto_approve_max_minor', { precision: 78, scale: 0 })
      .notNull()
      .default('0'),
    /** From this amount on, two distinct staff approvals are needed (four eyes). */
    fourEyesMinMinor: numeric('four_eyes_min_minor', { precision: 78, scale: 0 }).notNull(),
    /** More withdrawals than this from one account within an hour is a risk flag. */
    velocityMaxPerHour: integer('velocity_max_per_hour').notNull().default(10),
    /** Same destination and amount within this window is a risk flag, never a merge. */
    similarWindowMinutes: integer('similar_window_minutes').notNull().default(60),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.assetCode] }), tenantPolicy()],
);

/**
 * A tenant's hot wallet per network. The next nonce is allocated by a conditional UPDATE in the
 * signing transaction, so two workers can never sign with one nonce.
 */
export const hotWallets = pgTable(
  'hot_wallets',
  {
    tenantId: uuid('tenant_id').notNull(),
    network: text('network').notNull(),
    address: text('address').notNull(),
    /**
     * Where the signing key lives, never the key: 'pkcs11:…' (an HSM, docs/SIGNING.md), or on
     * development chains only 'dev:<index>', 'env:<VARIABLE>', 'keystore:<path>#<VARIABLE>'.
     */
    keyRef: text('key_ref').notNull(),
    nextNonce: bigint('next_nonce', { mode: 'number' }).notNull().default(0),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.network] }),
    check('hot_wallets_nonce_non_negative', sql`${t.nextNonce} >= 0`),
    tenantPolicy(),
  ],
);

/**
 * Differences found by three-way reconciliation (ledger, custody, chain), C21. Nothing adjusts a
 * balance automatically: a break is investigated, owned, and closed with evidence.
 */
export const reconciliationBreaks = pgTable(
  'reconciliation_breaks',
  {
    tenantId: uuid('tenant_id').notNull(),
    breakId: uuid('break_id').notNull(),
    /** timing | unknown_operation | genuine_variance */
    breakClass: text('break_class').notNull(),
    /** What disagrees, e.g. 'operation:<id>' or 'wallet:ethereum:ETH'. One open break per subject. */
    subject: text('subject').notNull(),
    assetCode: text('asset_code'),
    ledgerAmountMinor: numeric('ledger_amount_minor', { precision: 78, scale: 0 }),
    observedAmountMinor: numeric('observed_amount_minor', { precision: 78, scale: 0 }),
    details: jsonb('details').notNull(),
    owner: text('owner').notNull(),
    status: text('status').notNull().default('open'),
    openedAt: timestamp('opened_at', { withTimezone: true }).notNull().defaultNow(),
    closedAt: timestamp('closed_at', { withTimezone: true }),
    closedBy: text('closed_by'),
    closureEvidence: jsonb('closure_evidence'),
    /**
     * How a closed break ended: resolved (a person), arrived (a timing difference the item closed),
     * escalated (a timing difference that outlived its asset's window; see `escalated_from`).
     * The values and their consistency with `status` are checked in the recon_breaks custom migration.
     */
    closedAs: text('closed_as'),
    /** The timing break this genuine_variance break escalated (same subject, closed as escalated). */
    escalatedFrom: uuid('escalated_from'),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.breakId] }),
    foreignKey({
      name: 'reconciliation_breaks_escalated_from_fk',
      columns: [t.tenantId, t.escalatedFrom],
      foreignColumns: [t.tenantId, t.breakId],
    }),
    // A timing break escalates at most once.
    uniqueIndex('reconciliation_breaks_one_escalation')
      .on(t.tenantId, t.escalatedFrom)
      .where(sql`${t.escalatedFrom} is not null`),
    uniqueIndex('reconciliation_breaks_one_open_per_subject')
      .on(t.tenantId, t.subject)
      .where(sql`${t.status} = 'open'`),
    index('reconciliation_breaks_status').on(t.tenantId, t.status, t.openedAt),
    check(
      'reconciliation_breaks_class_known',
      sql`${t.breakClass} in ('timing', 'unknown_operation', 'genuine_variance')`,
    ),
    check('reconciliation_breaks_status_known', sql`${t.status} in ('open', 'closed')`),
    check(
      'reconciliation_breaks_closed_with_evidence',
      sql`(${t.status} = 'open') = (${t.closedAt} is null) and (${t.status} = 'open' or ${t.closureEvidence} is not null)`,
    ),
    tenantPolicy(),
  ],
);
