import {
  bigserial,
  foreignKey,
  index,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';
import { tenants } from './tenants.ts';

/**
 * What staff did, one row per action: sign-ins (failed ones too), decisions, resolutions,
 * escalations, configuration changes, exports. Append-only: the application role may insert and
 * read, and a trigger refuses every update, delete and truncate (core/sql/idem_refuse_change.sql).
 */
export const auditLog = pgTable(
  'audit_log',
  {
    tenantId: uuid('tenant_id').notNull(),
    entryId: uuid('entry_id').notNull(),
    /** Order of recording, and the cursor of the log. */
    sequence: bigserial('sequence', { mode: 'bigint' }).notNull(),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
    /** `staff:<user id>`, or `anonymous` for a sign-in that named no known person. */
    actor: text('actor').notNull(),
    /** The procedure, e.g. `staffProposals.decide`. */
    action: text('action').notNull(),
    /** `ok`, or the stable error code the action was refused with. */
    outcome: text('outcome').notNull(),
    sourceAddress: text('source_address'),
    requestId: text('request_id'),
    /** What was asked, with secrets, destinations and memos removed (contracts/redaction.ts). */
    details: jsonb('details').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.entryId] }),
    foreignKey({ columns: [t.tenantId], foreignColumns: [tenants.tenantId] }),
    index('audit_log_page').on(t.tenantId, t.sequence),
    index('audit_log_actor').on(t.tenantId, t.actor, t.sequence),
    index('audit_log_action').on(t.tenantId, t.action, t.sequence),
    tenantPolicy(),
  ],
);
