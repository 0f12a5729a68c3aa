import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

const stateList = sql.raw(
  `'REQUESTED','APPROVED','REJECTED','SIGNING','SIGNED','BROADCAST','UNKNOWN','CONFIRMED','VERIFIED_NOT_SENT','FAILED_TERMINAL','REVERSED'`,
);

/**
 * States an operation may still leave by work or by a decision: the partial index of the metrics
 * aggregate holds these only. The others (REJECTED, CONFIRMED, VERIFIED_NOT_SENT, REVERSED) are
 * where a tenant's history accumulates.
 */
export const IN_FLIGHT_STATES = [
  'REQUESTED',
  'APPROVED',
  'SIGNING',
  'SIGNED',
  'BROADCAST',
  'UNKNOWN',
  'FAILED_TERMINAL',
] as const;
const inFlightList = sql.raw(IN_FLIGHT_STATES.map((state) => `'${state}'`).join(','));

/**
 * One row per intent. Identity (tenant, key, reference) and the approved payload are immutable:
 * a trigger refuses any UPDATE of them (core/sql/idem_guard_operation_update.sql). The payload is
 * kept as discrete columns so that a signer can recompute the hash from what is actually stored
 * (C02).
 */
export const operations = pgTable(
  'operations',
  {
    tenantId: uuid('tenant_id').notNull(),
    operationId: uuid('operation_id').notNull(),
    kind: text('kind').notNull(),
    idempotencyKey: text('idempotency_key').notNull(),
    /** The integrator's withdrawal id, or the deposit's chain/custodian reference. */
    reference: text('reference').notNull(),
    accountRef: text('account_ref').notNull(),
    assetCode: text('asset_code').notNull(),
    network: text('network').notNull(),
    destination: text('destination'),
    memo: text('memo'),
    /** Positive, except for a debit adjustment. */
    amountMinor: numeric('amount_minor', { precision: 78, scale: 0 }).notNull(),
    feeCapMinor: numeric('fee_cap_minor', { precision: 78, scale: 0 }),
    policyVersion: integer('policy_version').notNull(),
    /** Hex SHA-256 of the RFC 8785 canonical JSON of the approved fields. */
    payloadHash: text('payload_hash').notNull(),
    state: text('state').notNull(),
    rejectionCode: text('rejection_code'),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true }),
    /** A fencing number: grows with every claim; a worker's later writes must carry the current one. */
    leaseGeneration: bigint('lease_generation', { mode: 'number' }).notNull().default(0),
    /** The signed bytes (hex), persisted before the first broadcast and never changed after (C12). */
    signedArtifact: text('signed_artifact'),
    txHash: text('tx_hash'),
    /** The hot wallet nonce this transaction was signed with (EVM); final once set. */
    chainNonce: bigint('chain_nonce', { mode: 'number' }),
    /** The custodian's durable id for our transfer; final once set. */
    providerRef: text('provider_ref'),
    /**
     * The on-chain hash the custodian reports for our transfer (its word, not our signing); final
     * once set. With providerRef it is where a custodian-routed withdrawal's money went.
     */
    providerTxHash: text('provider_tx_hash'),
    /** Risk signals found at review (C06: signals, never a merge or drop). */
    riskFlags: jsonb('risk_flags'),
    /** How many distinct staff approvals this withdrawal needs (0: approved by the system). */
    approvalsRequired: integer('approvals_required'),
    /**
     * Why an APPROVED withdrawal is not signed yet (its fee cap cannot pay the current base fee):
     * shown to staff and the tenant; cleared when it is signed.
     */
    waitingReason: text('waiting_reason'),
    /** Who is accountable for an UNKNOWN or FAILED_TERMINAL operation (C15). */
    owner: text('owner'),
    version: bigint('version', { mode: 'number' }).notNull().default(0),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    /** Set when the operation reaches a state from which its key may one day expire (C07). */
    settledAt: timestamp('settled_at', { withTimezone: true }),
    keyExpiredAt: timestamp('key_expired_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.operationId] }),
    unique('operations_tenant_key').on(t.tenantId, t.idempotencyKey),
    unique('operations_tenant_kind_reference').on(t.tenantId, t.kind, t.reference),
    index('operations_tenant_state').on(t.tenantId, t.state, t.updatedAt),
    index('operations_state_lease').on(t.state, t.leaseExpiresAt),
    // Keyset pages over a tenant's history (queries/list.ts), each served in its own order as an
    // index range: all of a kind, one state of a kind, one account's.
    index('operations_page_kind').on(t.tenantId, t.kind, t.createdAt, t.operationId),
    index('operations_page_kind_state').on(t.tenantId, t.kind, t.state, t.createdAt, t.operationId),
    index('operations_page_account').on(t.tenantId, t.accountRef, t.kind, t.createdAt, t.operationId),
    // The staff Withdrawals explorer (queries/withdrawal-explorer.ts): sorted by amount, and one
    // exact destination's withdrawals, each an index range in its order.
    index('operations_page_amount').on(t.tenantId, t.kind, t.amountMinor, t.createdAt, t.operationId),
    index('operations_page_destination')
      .on(t.tenantId, t.destination, t.createdAt, t.operationId)
      .where(sql`${t.kind} = 'withdrawal'`),
    // The staff Overview (queries/overview.ts): open withdrawals per state and asset with their
    // amounts, read from the index alone and never from the settled history.
    index('operations_open_withdrawals')
      .on(t.tenantId, t.state, t.assetCode, t.amountMinor)
      .where(
        sql`${t.kind} = 'withdrawal' and ${t.state} in ('REQUESTED','APPROVED','SIGNING','SIGNED','BROADCAST','UNKNOWN','FAILED_TERMINAL')`,
      ),
    // The staff approval queue (staff/queries.ts), oldest first: only withdrawals awaiting a staff
    // decision, so the index stays the size of the queue however long the history grows.
    index('operations_approval_queue')
      .on(t.tenantId, t.createdAt, t.operationId)
      .where(sql`kind = 'withdrawal' and state = 'REQUESTED' and approvals_required > 0`),
    // The staff search by transaction hash. A plain column, not lower(tx_hash): under row-level
    // security a qual calling a function that is not leakproof (lower) cannot be an index condition.
    // Partial: a withdrawal has no hash when it is created, so creation does not maintain this index;
    // `tx_hash = $1` implies the predicate, so the search still uses it.
    index('operations_tx_hash').on(t.tenantId, t.txHash).where(sql`tx_hash is not null`),
    // The /metrics aggregate (core/sql/idem_operation_stats.sql): counts and oldest age of the
    // states still in flight, across tenants, read from this index alone: O(in flight), not O(history).
    index('operations_in_flight').on(t.state, t.updatedAt).where(sql`state in (${inFlightList})`),
    check('operations_kind_known', sql`${t.kind} in ('withdrawal', 'deposit', 'adjustment')`),
    check('operations_state_known', sql`${t.state} in (${stateList})`),
    check(
      'operations_amount_sign',
      sql`${t.amountMinor} > 0 or (${t.kind} = 'adjustment' and ${t.amountMinor} <> 0)`,
    ),
    check('operations_fee_cap_positive', sql`${t.feeCapMinor} is null or ${t.feeCapMinor} > 0`),
    tenantPolicy(),
  ],
);

/** Append-only history of every state change, with who did it and on what evidence. */
export const operationTransitions = pgTable(
  'operation_transitions',
  {
    tenantId: uuid('tenant_id').notNull(),
    operationId: uuid('operation_id').notNull(),
    /** The operation's version after the change; with the primary key it orders history. */
    seq: bigint('seq', { mode: 'number' }).notNull(),
    fromState: text('from_state'),
    toState: text('to_state').notNull(),
    actor: text('actor').notNull(),
    reason: text('reason').notNull(),
    evidence: jsonb('evidence'),
    leaseGeneration: bigint('lease_generation', { mode: 'number' }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.operationId, t.seq] }),
    // The Overview's submit-to-confirmed latency over the day (queries/overview.ts).
    index('operation_transitions_confirmed')
      .on(t.tenantId, t.createdAt)
      .where(sql`${t.toState} = 'CONFIRMED'`),
    // The automatic freeze trips count what became UNKNOWN or FAILED_TERMINAL, and what was sent,
    // within a window (core/src/freeze/trips.ts).
    index('operation_transitions_trips')
      .on(t.tenantId, t.createdAt)
      .where(sql`${t.toState} in ('UNKNOWN', 'FAILED_TERMINAL', 'BROADCAST')`),
    tenantPolicy(),
  ],
);
