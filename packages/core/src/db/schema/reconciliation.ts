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
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

const minor = (name: string) => numeric(name, { precision: 78, scale: 0 });

/**
 * One balance-level reconciliation of a tenant (issue 13): who or what ran it, what it was pinned
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
