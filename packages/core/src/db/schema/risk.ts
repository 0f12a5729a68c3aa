import { sql } from 'drizzle-orm';
import {
  check,
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
 * Every change of a tenant's risk or approval rules, one row per policy version it produced.
 * Written only by the database itself (a trigger on `risk_policies`,
 * core/sql/idem_record_policy_change.sql), never updated or deleted: the record of which rules each payload's
 * `policy_version` stood for, and who changed them.
 */
export const policyHistory = pgTable(
  'policy_history',
  {
    tenantId: uuid('tenant_id').notNull(),
    /** The tenant's policy version after this change; one row per version. */
    toVersion: integer('to_version').notNull(),
    fromVersion: integer('from_version').notNull(),
    /** Which rules: 'risk' (the per-asset review and approval thresholds). */
    policy: text('policy').notNull(),
    assetCode: text('asset_code'),
    /** The rules before and after, numbers as decimal strings; null before a creation. */
    before: jsonb('before').$type<Record<string, string> | null>(),
    after: jsonb('after').$type<Record<string, string> | null>(),
    /** Who changed them: a staff id, 'cli:<user>', or the provisioning path's name. */
    actor: text('actor').notNull(),
    changedAt: timestamp('changed_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.toVersion] }),
    check('policy_history_one_step', sql`${t.toVersion} = ${t.fromVersion} + 1`),
    check('policy_history_policy_known', sql`${t.policy} in ('risk')`),
    check('policy_history_actor_named', sql`length(${t.actor}) > 0`),
    check('policy_history_changed', sql`${t.before} is not null or ${t.after} is not null`),
    tenantPolicy(),
  ],
);
