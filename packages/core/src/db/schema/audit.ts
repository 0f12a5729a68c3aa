import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  foreignKey,
  index,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';
import { tenants } from './tenants.ts';

/**
 * What staff did, one row per action: sign-ins (failed ones too), decisions, resolutions,
 * escalations, configuration changes, exports. Append-only: the application role may insert and
 * read, and a trigger refuses every update, delete and truncate (core/sql/idem_refuse_change.sql).
 *
 * Each tenant's rows form a hash chain, computed by the database as a row is inserted
 * (core/sql/idem_audit_chain.sql): whatever the inserter sends, a row's position, previous hash
 * and hash are set under a lock on the tenant's chain head, so concurrent inserts of one tenant
 * serialise and no login can write an unchained row. The three columns default to NULL only so an
 * insert need not name them; the trigger fills them before NOT NULL is checked.
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
    /** 1, 2, 3... within the tenant: the row's place in its chain. */
    chainPosition: bigint('chain_position', { mode: 'bigint' }).notNull().default(sql`null`),
    /** The hash of the tenant's previous row (64 zeros for its first). */
    prevHash: text('prev_hash').notNull().default(sql`null`),
    /** sha256 of the canonical JSON of this row's fields and prevHash (idem_audit_entry_hash). */
    hash: text('hash').notNull().default(sql`null`),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.entryId] }),
    foreignKey({ columns: [t.tenantId], foreignColumns: [tenants.tenantId] }),
    index('audit_log_page').on(t.tenantId, t.sequence),
    index('audit_log_actor').on(t.tenantId, t.actor, t.sequence),
    index('audit_log_action').on(t.tenantId, t.action, t.sequence),
    uniqueIndex('audit_log_chain').on(t.tenantId, t.chainPosition),
    tenantPolicy(),
  ],
);

/**
 * Each tenant's chain head: the position and hash of its last audit row. The insert trigger locks
 * this row (FOR UPDATE) to extend the chain, which serialises one tenant's audit inserts; the
 * verifier compares the last row with it, so a deleted tail is found. Only the trigger's owner
 * (idem_audit) writes it; the application role reads its own tenant's.
 */
export const auditChainHeads = pgTable(
  'audit_chain_heads',
  {
    tenantId: uuid('tenant_id').primaryKey(),
    position: bigint('position', { mode: 'bigint' }).notNull(),
    hash: text('hash').notNull(),
  },
  (t) => [foreignKey({ columns: [t.tenantId], foreignColumns: [tenants.tenantId] }), tenantPolicy()],
);
