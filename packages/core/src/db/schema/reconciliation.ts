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

const minor = (name: string) => numeric(name, { precision: 78, scale: 0 });

/**
 * One balance-level reconciliation of a tenant: who or what ran it, what it was pinned
 * to, and its result. Written 'running' first; finished once, with its figures, in one
 * transaction; after that the database refuses any change
 * (core/sql/idem_guard_reconciliation_run.sql), so a run is the record an auditor receives.
 */
export const reconciliationRuns = pgTable(
  'reconciliation_runs',
  {
    tenantId: uuid('tenant_id').notNull(),
    runId: uuid('run_id').notNull(),
    /** 'worker:<id>', 'staff:<userId>' or 'cli:<os user>'. */
    ranBy: text('ran_by').notNull(),
    /** schedule | on_demand */
    trigger: text('trigger').notNull(),
    /** Pinned block per network, custodian report times, the window of in-flight items. */
    inputs: jsonb('inputs').notNull(),
    /** running | finished | failed */
    status: text('status').notNull().default('running'),
    /** balanced | explained | variance | incomplete; null while running. */
    result: text('result'),
    breaksOpened: integer('breaks_opened').notNull().default(0),
    /** Why a failed run failed, or what could not be observed (scrubbed text). */
    note: text('note'),
    startedAt: timestamp('started_at', { withTimezone: true }).notNull().defaultNow(),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.runId] }),
    index('reconciliation_runs_started').on(t.tenantId, t.startedAt),
    check('reconciliation_runs_trigger_known', sql`${t.trigger} in ('schedule', 'on_demand')`),
    check('reconciliation_runs_status_known', sql`${t.status} in ('running', 'finished', 'failed')`),
    check(
      'reconciliation_runs_result_known',
      sql`${t.result} is null or ${t.result} in ('balanced', 'explained', 'variance', 'incomplete')`,
    ),
    check(
      'reconciliation_runs_finished_shape',
      sql`(${t.status} = 'running') = (${t.finishedAt} is null) and (${t.status} <> 'finished' or ${t.result} is not null)`,
    ),
    tenantPolicy(),
  ],
);

/**
 * The figures of one run per holding place and asset. `place` is 'chain:<network>' (the tenant's
 * hot wallet and deposit addresses, read at `pinned_block`) or 'custodian:<account>' (the
 * custodian's reported balance at `reported_at`). Ledger side: the tenant's own figures; for a
 * shared (omnibus) custodian account, `account_ledger_minor` is the sum over every tenant of the
 * account, read through a function that returns only that sum.
 */
export const reconciliationRunFigures = pgTable(
  'reconciliation_run_figures',
  {
    tenantId: uuid('tenant_id').notNull(),
    runId: uuid('run_id').notNull(),
    place: text('place').notNull(),
    assetCode: text('asset_code').notNull(),
    liabilitiesAvailableMinor: minor('liabilities_available_minor').notNull(),
    liabilitiesHeldMinor: minor('liabilities_held_minor').notNull(),
    /** What the ledger says custody holds: minus the sum of '@custody' postings. */
    custodyControlMinor: minor('custody_control_minor').notNull(),
    /** Gas paid, posted to '@network_fees' (positive: an expense). */
    feeExpenseMinor: minor('fee_expense_minor').notNull(),
    /** Withdrawals sent and not settled (BROADCAST, UNKNOWN, FAILED_TERMINAL): still held. */
    inFlightWithdrawalsMinor: minor('in_flight_withdrawals_minor').notNull(),
    /** The ledger figure the place is compared with (the account's sum for an omnibus account). */
    expectedMinor: minor('expected_minor').notNull(),
    /** Null when the place could not be observed (the run is then incomplete). */
    observedMinor: minor('observed_minor'),
    /** Signed: what in-flight items explain of observed - expected. */
    explainedMinor: minor('explained_minor').notNull(),
    /** observed - expected - explained; non-zero opens a genuine_variance break. */
    unexplainedMinor: minor('unexplained_minor'),
    /** The items that explain a difference: [{ kind, subject, amountMinor }]. */
    explanations: jsonb('explanations').notNull(),
    pinnedBlock: bigint('pinned_block', { mode: 'number' }),
    reportedAt: timestamp('reported_at', { withTimezone: true }),
    /** Tenants whose ledgers the expected figure sums (1 unless the account is shared). */
    accountTenants: integer('account_tenants').notNull().default(1),
    breakId: uuid('break_id'),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.runId, t.place, t.assetCode] }),
    foreignKey({
      columns: [t.tenantId, t.runId],
      foreignColumns: [reconciliationRuns.tenantId, reconciliationRuns.runId],
    }),
    check('reconciliation_run_figures_place_shape', sql`${t.place} ~ '^(chain|custodian):[a-z0-9_-]{1,64}$'`),
    check(
      'reconciliation_run_figures_observation_shape',
      sql`(${t.observedMinor} is null) = (${t.unexplainedMinor} is null)
          and (${t.place} not like 'chain:%' or ${t.observedMinor} is null or ${t.pinnedBlock} is not null)
          and (${t.place} not like 'custodian:%' or ${t.observedMinor} is null or ${t.reportedAt} is not null)`,
    ),
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
