import { sql } from 'drizzle-orm';
import { bigint, check, integer, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * The first of the two chain passes a VERIFIED_NOT_SENT verdict needs (issue 12): the withdrawal's
 * nonce seen consumed, at a pinned block at the asset's depth, by a transaction that is not ours.
 * Kept durably so a restarted worker still needs, and still can complete, the second pass. One row
 * per operation: a pass that sees otherwise replaces or removes it.
 */
export const notSentObservations = pgTable(
  'not_sent_observations',
  {
    tenantId: uuid('tenant_id').notNull(),
    operationId: uuid('operation_id').notNull(),
    nonce: integer('nonce').notNull(),
    /** The transaction that took the nonce, and the block it is in. */
    consumerTxHash: text('consumer_tx_hash').notNull(),
    consumerBlock: bigint('consumer_block', { mode: 'number' }).notNull(),
    /** The block every read of that pass was pinned to. */
    pinnedBlock: bigint('pinned_block', { mode: 'number' }).notNull(),
    observedAt: timestamp('observed_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.operationId] }),
    check('not_sent_observations_consumer_deep', sql`${t.consumerBlock} <= ${t.pinnedBlock}`),
    tenantPolicy(),
  ],
);
