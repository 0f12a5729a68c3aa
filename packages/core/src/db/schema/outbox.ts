import { index, integer, jsonb, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * Work items written in the same transaction as the change that needs them (transactional
 * outbox), so a committed change can never lose its follow-up work.
 */
export const workItems = pgTable(
  'work_items',
  {
    tenantId: uuid('tenant_id').notNull(),
    workId: uuid('work_id').notNull(),
    topic: text('topic').notNull(),
    operationId: uuid('operation_id'),
    payload: jsonb('payload').notNull(),
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    availableAt: timestamp('available_at', { withTimezone: true }).notNull().defaultNow(),
    lockedBy: text('locked_by'),
    lockedUntil: timestamp('locked_until', { withTimezone: true }),
    lastError: text('last_error'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.workId] }),
    index('work_items_pending').on(t.status, t.availableAt),
    tenantPolicy(),
  ],
);
