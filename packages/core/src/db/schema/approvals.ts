import { sql } from 'drizzle-orm';
import { check, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
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
