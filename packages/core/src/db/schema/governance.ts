import { sql } from 'drizzle-orm';
import {
  boolean,
  check,
  index,
  integer,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * A tenant's governance settings: how long a proposal stays open. A tenant without a row has the
 * defaults (core/src/tenants/governance.ts), so a tenant made before these settings existed
 * behaves like a new one.
 */
export const tenantGovernance = pgTable(
  'tenant_governance',
  {
    tenantId: uuid('tenant_id').notNull(),
    /** A proposal not decided within this many seconds of being made expires (72 hours by default). */
    proposalTtlSeconds: integer('proposal_ttl_seconds').notNull().default(259_200),
    /** Admins who must agree to loosen a control, the proposer included (M of N, at least 2). */
    adminQuorum: integer('admin_quorum').notNull().default(2),
    /** Seconds between a loosening's approval and its effect (24 hours by default). */
    looseningDelaySeconds: integer('loosening_delay_seconds').notNull().default(86_400),
    /**
     * Chosen at creation for a tenant with one admin: withdrawals above the auto-approve limit cannot
     * be approved and no control can be loosened until a second admin exists.
     */
    singleAdmin: boolean('single_admin').notNull().default(false),
    /**
     * Every approval of a withdrawal needs the approver's passkey assertion (docs/GOVERNANCE.md
     * "Passkeys"). Turning it on tightens (at once); turning it off is a governance control change.
     */
    requirePasskeyApprovals: boolean('require_passkey_approvals').notNull().default(false),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId] }),
    check('tenant_governance_ttl_range', sql`${t.proposalTtlSeconds} between 1 and 2592000`),
    check('tenant_governance_quorum_range', sql`${t.adminQuorum} between 2 and 20`),
    check('tenant_governance_delay_range', sql`${t.looseningDelaySeconds} between 0 and 2592000`),
    tenantPolicy(),
  ],
);

/**
 * What every admin is told about control changes (proposed, approved and when it takes effect,
 * applied, refused): one row per recipient, append-only, shown on the staff Overview.
 */
export const staffNotifications = pgTable(
  'staff_notifications',
  {
    tenantId: uuid('tenant_id').notNull(),
    notificationId: uuid('notification_id').notNull(),
    /** The admin told, 'staff:<user id>'. */
    recipient: text('recipient').notNull(),
    topic: text('topic').notNull(),
    proposalId: uuid('proposal_id'),
    message: text('message').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.notificationId] }),
    index('staff_notifications_recipient').on(t.tenantId, t.recipient, t.createdAt),
    tenantPolicy(),
  ],
);
