import { sql } from 'drizzle-orm';
import {
  bigserial,
  check,
  foreignKey,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * Where a tenant (the operator) receives Idem's outbound webhooks: every state change of its
 * operations, signed with Standard Webhooks. The secret must be kept in clear to sign.
 */
export const outboundEndpoints = pgTable(
  'outbound_endpoints',
  {
    tenantId: uuid('tenant_id').notNull(),
    endpointId: uuid('endpoint_id').notNull(),
    url: text('url').notNull(),
    secret: text('secret').notNull(),
    /**
     * The secret a rotation replaced: until `previous_secret_until` every attempt is signed with
     * both (Standard Webhooks allows several signatures), so the receiver can switch.
     */
    previousSecret: text('previous_secret'),
    previousSecretUntil: timestamp('previous_secret_until', { withTimezone: true }),
    rotatedAt: timestamp('rotated_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    disabledAt: timestamp('disabled_at', { withTimezone: true }),
    /**
     * When the endpoint began to receive. Null while one added from the staff screens waits for its
     * control change (another admin's approval and the tenant's delay); endpoints from the
     * deployment's own tools and older ones are active.
     */
    activatedAt: timestamp('activated_at', { withTimezone: true }).defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.endpointId] }), tenantPolicy()],
);

/**
 * One notification to one endpoint: the delivery log an operator reads (status, attempts, last
 * response, next retry). Each endpoint has its own row, so a failing or slow endpoint never causes
 * a redelivery to, or a delay for, a healthy one. The body is fixed when the notification is fanned
 * out, so every attempt sends the same content under the same webhook id (the work item's id);
 * each attempt is signed anew with its own timestamp.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    tenantId: uuid('tenant_id').notNull(),
    workId: uuid('work_id').notNull(),
    endpointId: uuid('endpoint_id').notNull(),
    /** Fan-out order: an endpoint receives its notifications in the order they were raised. */
    sequence: bigserial('sequence', { mode: 'bigint' }).notNull(),
    operationId: uuid('operation_id'),
    body: jsonb('body').notNull(),
    status: text('status', { enum: ['pending', 'done', 'dead'] })
      .notNull()
      .default('pending'),
    attempts: integer('attempts').notNull().default(0),
    availableAt: timestamp('available_at', { withTimezone: true }).notNull().defaultNow(),
    lockedBy: text('locked_by'),
    lockedUntil: timestamp('locked_until', { withTimezone: true }),
    lastResponseStatus: integer('last_response_status'),
    lastError: text('last_error'),
    lastAttemptAt: timestamp('last_attempt_at', { withTimezone: true }),
    deliveredAt: timestamp('delivered_at', { withTimezone: true }),
    manualRedeliveries: integer('manual_redeliveries').notNull().default(0),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.workId, t.endpointId] }),
    foreignKey({
      columns: [t.tenantId, t.endpointId],
      foreignColumns: [outboundEndpoints.tenantId, outboundEndpoints.endpointId],
    }),
    index('webhook_deliveries_due').on(t.tenantId, t.status, t.availableAt),
    index('webhook_deliveries_log').on(t.tenantId, t.sequence),
    check('webhook_deliveries_status', sql`${t.status} in ('pending', 'done', 'dead')`),
    check('webhook_deliveries_attempts', sql`${t.attempts} >= 0`),
    tenantPolicy(),
  ],
);
