import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  index,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

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
     * A reorganisation is acted on only when seen twice: the head at which the node
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
