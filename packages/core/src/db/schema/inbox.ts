import { sql } from 'drizzle-orm';
import {
  check,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * Every verified inbound event, once: unique on (tenant, source, event id), with the SHA-256 of the
 * raw body so a redelivery can be told from a different event under the same id (C18, C19). Its
 * work item commits in the same transaction. The body and its hash never change
 * (core/sql/idem_guard_inbox_event_update.sql).
 */
export const inboxEvents = pgTable(
  'inbox_events',
  {
    tenantId: uuid('tenant_id').notNull(),
    source: text('source').notNull(),
    eventId: text('event_id').notNull(),
    endpointId: text('endpoint_id').notNull(),
    eventType: text('event_type').notNull(),
    bodySha256: text('body_sha256').notNull(),
    body: jsonb('body').notNull(),
    /** RECEIVED: a work item awaits it; UNHANDLED: a type we do not know, stored and not acted on;
     * PROCESSED and PARKED are set by the worker that consumes it. */
    status: text('status').notNull(),
    deliveries: integer('deliveries').notNull().default(1),
    receivedAt: timestamp('received_at', { withTimezone: true }).notNull().defaultNow(),
    lastDeliveryAt: timestamp('last_delivery_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.source, t.eventId] }),
    check('inbox_events_status_known', sql`${t.status} in ('RECEIVED', 'UNHANDLED', 'PROCESSED', 'PARKED')`),
    tenantPolicy(),
  ],
);

/**
 * Input that cannot be trusted to mean one thing (C19): the same event id with a different body,
 * or a verified body that does not parse as the type it claims. Kept for a person to resolve, with
 * an alert; never acted on. One row per distinct body, so redeliveries do not pile up.
 */
export const inboxQuarantine = pgTable(
  'inbox_quarantine',
  {
    tenantId: uuid('tenant_id').notNull(),
    quarantineId: uuid('quarantine_id').notNull(),
    source: text('source').notNull(),
    eventId: text('event_id').notNull(),
    endpointId: text('endpoint_id').notNull(),
    reason: text('reason').notNull(),
    bodySha256: text('body_sha256').notNull(),
    /** The raw body as received (it may not be JSON). */
    body: text('body').notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true }).notNull().defaultNow(),
    resolvedAt: timestamp('resolved_at', { withTimezone: true }),
    resolvedBy: text('resolved_by'),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.quarantineId] }),
    unique('inbox_quarantine_tenant_event_body').on(t.tenantId, t.source, t.eventId, t.bodySha256),
    check('inbox_quarantine_reason_known', sql`${t.reason} in ('BODY_MISMATCH', 'MALFORMED')`),
    tenantPolicy(),
  ],
);

/**
 * Deliveries to a known endpoint that failed verification (C20), one row each, until the insider
 * review (I11-F9): kept as evidence, no longer written (migration inbox_rejection_buckets_integrity
 * revokes INSERT), since anyone who knows an endpoint id could grow it without bound. See
 * inboxRejectionBuckets.
 */
export const inboxRejections = pgTable(
  'inbox_rejections',
  {
    tenantId: uuid('tenant_id').notNull(),
    rejectionId: uuid('rejection_id').notNull(),
    endpointId: text('endpoint_id').notNull(),
    reason: text('reason').notNull(),
    bodyLength: integer('body_length').notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.rejectionId] }), tenantPolicy()],
);

/** Why a delivery failed verification: a closed set, so buckets cannot be multiplied by input. */
export const inboxRejectionReasons = [
  'MISSING_HEADERS',
  'BAD_SIGNATURE',
  'BAD_TIMESTAMP',
  'STALE_TIMESTAMP',
  'FUTURE_TIMESTAMP',
  'OTHER',
] as const;
export type InboxRejectionReason = (typeof inboxRejectionReasons)[number];

/**
 * Deliveries to a known endpoint that failed verification (C20), counted per endpoint, reason and
 * minute (I11-F9): an unauthenticated sender can make the count grow, never the number of rows
 * (at most one per endpoint, reason and minute). Minimal metadata only, never a body, since an
 * unverified body is attacker-controlled. A bucket only counts up, one at a time: its key and first
 * sighting never change and it is never deleted (core/sql/idem_guard_inbox_rejection_bucket.sql).
 */
export const inboxRejectionBuckets = pgTable(
  'inbox_rejection_buckets',
  {
    tenantId: uuid('tenant_id').notNull(),
    endpointId: text('endpoint_id').notNull(),
    reason: text('reason').notNull(),
    /** The minute the rejections arrived in (date_trunc('minute', now())). */
    bucketStart: timestamp('bucket_start', { withTimezone: true }).notNull(),
    rejections: integer('rejections').notNull(),
    bodyLengthMax: integer('body_length_max').notNull(),
    firstSeenAt: timestamp('first_seen_at', { withTimezone: true }).notNull().defaultNow(),
    lastSeenAt: timestamp('last_seen_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.endpointId, t.reason, t.bucketStart] }),
    check(
      'inbox_rejection_buckets_reason_known',
      sql.raw(`reason in (${inboxRejectionReasons.map((reason) => `'${reason}'`).join(', ')})`),
    ),
    check('inbox_rejection_buckets_counted', sql`${t.rejections} >= 1 and ${t.bodyLengthMax} >= 0`),
    tenantPolicy(),
  ],
);
