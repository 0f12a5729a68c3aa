import { sql } from 'drizzle-orm';
import {
  check,
  index,
  integer,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * The freeze switch (docs/GOVERNANCE.md "Freeze"): a tenant, one of its assets or one of its
 * accounts frozen by one member with `operate`, at once. In force while `lifted_at` is null: the
 * claim for signing takes no withdrawal under it (core/src/state-machine/lease.ts). A freeze is
 * never deleted; lifting it records who lifted it and the approved control change that did
 * (trigger freezes_guard, core/sql/idem_guard_freeze_write.sql).
 */
export const freezes = pgTable(
  'freezes',
  {
    tenantId: uuid('tenant_id').notNull(),
    freezeId: uuid('freeze_id').notNull(),
    /** 'tenant', 'asset' (asset_code) or 'account' (account_ref). */
    scope: text('scope').notNull(),
    assetCode: text('asset_code'),
    accountRef: text('account_ref'),
    reason: text('reason').notNull(),
    /** The staff actor who froze ('staff:<id>'). */
    frozenBy: text('frozen_by').notNull(),
    frozenAt: timestamp('frozen_at', { withTimezone: true }).notNull().defaultNow(),
    liftedAt: timestamp('lifted_at', { withTimezone: true }),
    /** The proposer of the control change that lifted it. */
    liftedBy: text('lifted_by'),
    liftProposalId: uuid('lift_proposal_id'),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.freezeId] }),
    // The claim looks up the freezes in force of one tenant on every withdrawal it takes.
    index('freezes_in_force').on(t.tenantId, t.scope).where(sql`${t.liftedAt} is null`),
    // An automatic trip freezes once: while its freeze is in force, a second check that crossed
    // the same threshold (another worker, the same moment) inserts nothing (core/src/freeze/trips.ts).
    uniqueIndex('freezes_one_per_trip')
      .on(t.tenantId, t.frozenBy)
      .where(sql`${t.liftedAt} is null and ${t.frozenBy} like 'system:trip:%'`),
    check(
      'freezes_scope_target',
      sql`(${t.scope} = 'tenant' and ${t.assetCode} is null and ${t.accountRef} is null)
       or (${t.scope} = 'asset' and ${t.assetCode} is not null and ${t.accountRef} is null)
       or (${t.scope} = 'account' and ${t.accountRef} is not null and ${t.assetCode} is null)`,
    ),
    check('freezes_reason_given', sql`length(${t.reason}) > 0`),
    check('freezes_actor_named', sql`length(${t.frozenBy}) > 0`),
    check(
      'freezes_lift_whole',
      sql`(${t.liftedAt} is null and ${t.liftedBy} is null and ${t.liftProposalId} is null)
       or (${t.liftedAt} is not null and ${t.liftedBy} is not null and ${t.liftProposalId} is not null)`,
    ),
    tenantPolicy(),
  ],
);

/**
 * The tenant's automatic freeze trips (docs/GOVERNANCE.md "Automatic trips"): one row for the
 * tenant (asset_code null) and at most one per asset. A trip is off while its columns are null.
 * The application role tightens a row at once and loosens it (a higher count, a shorter window, a
 * higher share, a trip off) only as the apply step of an approved, due `freeze_trip_loosen` control
 * change naming exactly the new row; it never deletes one (trigger freeze_trips_guard,
 * core/sql/idem_guard_freeze_trip_write.sql).
 */
export const freezeTrips = pgTable(
  'freeze_trips',
  {
    tenantId: uuid('tenant_id').notNull(),
    assetCode: text('asset_code'),
    failuresMax: integer('failures_max'),
    failuresWindowSeconds: integer('failures_window_seconds'),
    outflowShareMaxPercent: integer('outflow_share_max_percent'),
    updatedBy: text('updated_by').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    // One tenant-wide row (null asset) and one per asset.
    unique('freeze_trips_target').on(t.tenantId, t.assetCode).nullsNotDistinct(),
    check(
      'freeze_trips_failures_whole',
      sql`(${t.failuresMax} is null) = (${t.failuresWindowSeconds} is null)
      and (${t.failuresMax} is null or ${t.failuresMax} >= 0)
      and (${t.failuresWindowSeconds} is null or ${t.failuresWindowSeconds} between 60 and 604800)`,
    ),
    check(
      'freeze_trips_outflow_share',
      sql`${t.outflowShareMaxPercent} is null or ${t.outflowShareMaxPercent} between 1 and 100`,
    ),
    tenantPolicy(),
  ],
);
