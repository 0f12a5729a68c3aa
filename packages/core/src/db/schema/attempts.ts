import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  index,
  integer,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * Every signed transaction of a withdrawal, append-only: attempt 1 is the original
 * (the same bytes as operations.signed_artifact, which stay immutable), later ones are fee bumps
 * ('replacement') or a zero-value transfer to the hot wallet itself ('cancel'). All attempts share
 * the operation's chain_nonce, so at most one of them can ever be mined. Recorded before the
 * attempt is broadcast, fenced by the lease generation (core/sql/idem_guard_signed_attempt.sql).
 */
export const signedAttempts = pgTable(
  'signed_attempts',
  {
    tenantId: uuid('tenant_id').notNull(),
    operationId: uuid('operation_id').notNull(),
    attemptNo: integer('attempt_no').notNull(),
    nonce: bigint('nonce', { mode: 'number' }).notNull(),
    kind: text('kind').notNull(),
    signedArtifact: text('signed_artifact').notNull(),
    txHash: text('tx_hash').notNull(),
    gasLimit: numeric('gas_limit', { precision: 78, scale: 0 }).notNull(),
    maxFeePerGas: numeric('max_fee_per_gas', { precision: 78, scale: 0 }).notNull(),
    maxPriorityFeePerGas: numeric('max_priority_fee_per_gas', { precision: 78, scale: 0 }).notNull(),
    /** The operation's lease generation when this attempt was recorded (fencing). */
    leaseGeneration: bigint('lease_generation', { mode: 'number' }).notNull(),
    /** The worker that signed it, and for whom: 'auto', 'staff:<id>' or the approved cancel proposal. */
    createdBy: text('created_by').notNull(),
    requestedBy: text('requested_by'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.operationId, t.attemptNo] }),
    unique('signed_attempts_tx_hash').on(t.tenantId, t.txHash),
    index('signed_attempts_tenant_created').on(t.tenantId, t.createdAt),
    check('signed_attempts_kind_known', sql`${t.kind} in ('original', 'replacement', 'cancel')`),
    check(
      'signed_attempts_original_first',
      sql`(${t.attemptNo} = 1) = (${t.kind} = 'original') and ${t.attemptNo} >= 1`,
    ),
    check('signed_attempts_fees', sql`${t.maxPriorityFeePerGas} <= ${t.maxFeePerGas} and ${t.gasLimit} > 0`),
    tenantPolicy(),
  ],
);

/**
 * A staff member's request for a fee bump within the approved cap (operate permission): the
 * worker, which holds the key, signs it on its next pass. Append-only; a request is done once an
 * attempt newer than it exists.
 */
export const feeBumpRequests = pgTable(
  'fee_bump_requests',
  {
    tenantId: uuid('tenant_id').notNull(),
    requestId: uuid('request_id').notNull(),
    operationId: uuid('operation_id').notNull(),
    requestedBy: text('requested_by').notNull(),
    reason: text('reason').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.requestId] }),
    index('fee_bump_requests_operation').on(t.tenantId, t.operationId, t.createdAt),
    tenantPolicy(),
  ],
);

/**
 * The first of the two chain passes a VERIFIED_NOT_SENT verdict needs: the withdrawal's
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
