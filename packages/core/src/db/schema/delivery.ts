import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  check,
  foreignKey,
  index,
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
     * both (Standard Webhooks allows several signatures), so the receiver can switch (issue 14).
     */
    previousSecret: text('previous_secret'),
    previousSecretUntil: timestamp('previous_secret_until', { withTimezone: true }),
    rotatedAt: timestamp('rotated_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    disabledAt: timestamp('disabled_at', { withTimezone: true }),
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

/** Which customer account a deposit address on a network belongs to. */
export const depositAddresses = pgTable(
  'deposit_addresses',
  {
    tenantId: uuid('tenant_id').notNull(),
    network: text('network').notNull(),
    address: text('address').notNull(),
    accountRef: text('account_ref').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.network, t.address] }), tenantPolicy()],
);

/**
 * Deposits seen on chain, before and after crediting. A deposit is credited (as a deposit
 * operation) only once its block is deep enough; a reorganisation after crediting reverses it.
 */
export const depositObservations = pgTable(
  'deposit_observations',
  {
    tenantId: uuid('tenant_id').notNull(),
    /** `<txHash>:native` or `<txHash>:<logIndex>`: the chain's identity of the transfer. */
    depositId: text('deposit_id').notNull(),
    network: text('network').notNull(),
    accountRef: text('account_ref').notNull(),
    assetCode: text('asset_code').notNull(),
    amountMinor: numeric('amount_minor', { precision: 78, scale: 0 }).notNull(),
    blockNumber: bigint('block_number', { mode: 'number' }).notNull(),
    blockHash: text('block_hash').notNull(),
    /**
     * seen: waiting for depth; credited: a deposit operation exists; orphaned: reorganised out
     * before crediting (seen again if its transaction reappears); reversed: reorganised out after.
     */
    status: text('status').notNull().default('seen'),
    operationId: uuid('operation_id'),
    /**
     * A reorganisation is acted on only when seen twice (issue 12): the head at which the node
     * first showed another block at this height, and that block's hash. Cleared when the block is
     * seen canonical again; a failed or timed-out read changes neither.
     */
    mismatchHead: bigint('mismatch_head', { mode: 'number' }),
    mismatchHash: text('mismatch_hash'),
    firstSeenAt: timestamp('first_seen_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.depositId] }),
    index('deposit_observations_status').on(t.tenantId, t.status),
    check(
      'deposit_observations_status_known',
      sql`${t.status} in ('seen', 'credited', 'orphaned', 'reversed')`,
    ),
    check('deposit_observations_amount_positive', sql`${t.amountMinor} > 0`),
    tenantPolicy(),
  ],
);

/**
 * How far a scan has read, per tenant and stream: the deposit watcher per network (a block number),
 * the custodian poller under `custodian` (epoch milliseconds).
 */
export const chainCursors = pgTable(
  'chain_cursors',
  {
    tenantId: uuid('tenant_id').notNull(),
    network: text('network').notNull(),
    nextBlock: bigint('next_block', { mode: 'number' }).notNull().default(0),
    /**
     * The hash of block `next_block - 1` when it was scanned. A different canonical hash there
     * later means the chain was rewritten below the cursor: the watcher scans back over it.
     */
    scannedHash: text('scanned_hash'),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.network] }), tenantPolicy()],
);
