import { sql } from 'drizzle-orm';
import {
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * One staff member proposes an action that moves or releases money (a manual resolution, an
 * adjustment, a manual credit); other staff members approve it. The approval covers the hash of the
 * exact payload and the evidence the system gathered when it was proposed: what was approved is
 * what runs. Payload, evidence, hash and proposer are immutable
 * (core/sql/idem_guard_proposal_update.sql); the state only moves from PENDING to a final state, once.
 */
export const proposals = pgTable(
  'proposals',
  {
    tenantId: uuid('tenant_id').notNull(),
    proposalId: uuid('proposal_id').notNull(),
    kind: text('kind').notNull(),
    /** The proposer's key: a retried proposal replays instead of proposing twice. */
    idempotencyKey: text('idempotency_key').notNull(),
    /** The operation a resolution is about; null for actions that create their own. */
    targetOperationId: uuid('target_operation_id'),
    payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
    /** What the system found when the proposal was made (e.g. the chain's or custodian's answer). */
    evidence: jsonb('evidence').$type<Record<string, unknown>>(),
    /** Hex SHA-256 of the canonical JSON of tenant, kind, payload and evidence. */
    payloadHash: text('payload_hash').notNull(),
    proposedBy: text('proposed_by').notNull(),
    /** Distinct approvers needed, none of them the proposer. */
    approvalsRequired: integer('approvals_required').notNull(),
    state: text('state').notNull().default('PENDING'),
    /** What the execution produced (the operation it created or moved), or why it was refused. */
    result: jsonb('result').$type<Record<string, unknown>>(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    /**
     * Past this, nobody may decide on it and it is marked EXPIRED (the tenant's proposal lifetime,
     * 72 hours by default, from its creation).
     */
    expiresAt: timestamp('expires_at', { withTimezone: true })
      .notNull()
      .default(sql`now() + interval '72 hours'`),
    /** A control change approved: when it takes effect (the tenant's delay after the last approval). */
    effectiveAt: timestamp('effective_at', { withTimezone: true }),
    decidedAt: timestamp('decided_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.proposalId] }),
    unique('proposals_tenant_key').on(t.tenantId, t.idempotencyKey),
    index('proposals_tenant_state').on(t.tenantId, t.state, t.createdAt),
    index('proposals_due').on(t.tenantId, t.effectiveAt).where(sql`${t.state} = 'APPROVED'`),
    // One open proposal per operation: two people cannot race two different resolutions.
    uniqueIndex('proposals_one_pending_per_target')
      .on(t.tenantId, t.targetOperationId)
      .where(sql`${t.state} = 'PENDING' and ${t.targetOperationId} is not null`),
    check(
      'proposals_kind_known',
      sql`${t.kind} in ('resolve_withdrawal', 'adjustment', 'manual_credit', 'cancel_withdrawal', 'raise_fee_cap', 'control_change')`,
    ),
    check(
      'proposals_state_known',
      sql`${t.state} in ('PENDING', 'APPROVED', 'EXECUTED', 'REJECTED', 'CANCELLED', 'EXPIRED')`,
    ),
    check('proposals_approvals_positive', sql`${t.approvalsRequired} >= 1`),
    check('proposals_hash_hex', sql`${t.payloadHash} ~ '^[0-9a-f]{64}$'`),
    tenantPolicy(),
  ],
);

/**
 * Append-only: each staff member's one decision on a proposal, bound to the hash they were shown.
 * A member with an active passkey decides only with an assertion over the proposal's challenge
 * (staff/proposal-assertions.ts), kept here so anyone holding the registered public keys checks the
 * decision again (core/sql/idem_guard_proposal_decision_passkey.sql refuses the rows no device was
 * asked for).
 */
export const proposalDecisions = pgTable(
  'proposal_decisions',
  {
    tenantId: uuid('tenant_id').notNull(),
    proposalId: uuid('proposal_id').notNull(),
    approver: text('approver').notNull(),
    payloadHash: text('payload_hash').notNull(),
    decision: text('decision').notNull(),
    reason: text('reason'),
    /** The decider's passkey assertion (a StoredAssertion), or null: decided without a passkey. */
    passkeyAssertion: jsonb('passkey_assertion'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.proposalId, t.approver] }),
    check('proposal_decisions_decision_known', sql`${t.decision} in ('approve', 'reject')`),
    tenantPolicy(),
  ],
);
