import type { AttentionQueueItem, OperationState, StaffOperationView, TimelineEntry } from '@idem/contracts';
import { and, asc, desc, eq, inArray, isNull, or, type SQL, sql } from 'drizzle-orm';
import { requesterOf } from '../approvals/requester.ts';
import type { Tx } from '../db/connect.ts';
import {
  approvals,
  inboxEvents,
  inboxQuarantine,
  operations,
  operationTransitions,
} from '../db/schema/index.ts';
import { type Operation, toView } from '../operations/operation-record.ts';
import { LIST_LIMIT_MAX, pageOperations } from '../queries/list.ts';
import { decodeCursor, encodeCursor } from '../queries/page-cursor.ts';
import { allowedNext } from '../state-machine/transitions.ts';

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** An operation with what staff need to decide on it: hash, review outcome, approvals, owner. */
export async function toStaffView(tx: Tx, op: Operation): Promise<StaffOperationView> {
  const given = await tx
    .select()
    .from(approvals)
    .where(and(eq(approvals.tenantId, op.tenantId), eq(approvals.operationId, op.operationId)))
    .orderBy(asc(approvals.createdAt));
  return {
    ...toView(op),
    payloadHash: op.payloadHash,
    policyVersion: op.policyVersion,
    riskFlags: Array.isArray(op.riskFlags) ? (op.riskFlags as string[]) : null,
    approvalsRequired: op.approvalsRequired,
    owner: op.owner,
    version: op.version,
    ageSeconds: Math.max(0, Math.floor((Date.now() - op.updatedAt.getTime()) / 1000)),
    requester: await requesterOf(tx, op),
    approvals: given.map((row) => ({
      approver: row.approver,
      decision: row.decision as 'approve' | 'reject',
      payloadHash: row.payloadHash,
      reason: row.reason,
      passkeyCredentialId: (row.passkeyAssertion as { credentialId?: string } | null)?.credentialId ?? null,
      createdAt: row.createdAt.toISOString(),
    })),
    allowedNext: allowedNext(op.kind, op.state),
  };
}

async function staffPage(
  tx: Tx,
  conditions: SQL[],
  options: { cursor?: string | undefined; limit: number; oldestFirst?: boolean },
): Promise<{ items: StaffOperationView[]; nextCursor: string | null }> {
  const page = await pageOperations(tx, conditions, options);
  const items: StaffOperationView[] = [];
  for (const op of page.items) items.push(await toStaffView(tx, op));
  return { items, nextCursor: page.nextCursor };
}

/** Withdrawals waiting for staff: reviewed, still REQUESTED, needing at least one approval. Oldest first. */
export function listApprovalQueue(
  tx: Tx,
  tenantId: string,
  options: { cursor?: string | undefined; limit: number },
) {
  return staffPage(tx, approvalQueueConditions(tenantId), { ...options, oldestFirst: true });
}

/**
 * The approval queue's filter, as its own value so a test can EXPLAIN exactly what the queue runs.
 * The partial index `operations_approval_queue` (same predicate) serves it as an index range.
 */
export function approvalQueueConditions(tenantId: string): SQL[] {
  // Written as literals (not bound parameters), so that even a generic plan of a prepared
  // statement is seen to imply the partial index's predicate.
  return [
    eq(operations.tenantId, tenantId),
    sql`${operations.kind} = 'withdrawal' and ${operations.state} = 'REQUESTED' and ${operations.approvalsRequired} > 0`,
  ];
}

/** A cursor of the attention queue: PostgreSQL's own text of the state time (microseconds kept). */

/**
 * Withdrawals staff watch, oldest first by when each entered its current state: BROADCAST (sent,
 * not yet mined: its age is the time since broadcast), UNKNOWN past reconciliation, FAILED_TERMINAL.
 * The state time is the last history row that moved the operation into its state (an owner change
 * keeps the state and does not count); `alertAfterMs` is the age past which the workers alert, per
 * network, as the caller knows it.
 */
export async function listAttentionQueue(
  tx: Tx,
  tenantId: string,
  options: {
    state: 'BROADCAST' | 'UNKNOWN' | 'FAILED_TERMINAL';
    cursor?: string | undefined;
    limit: number;
    alertAfterMs?: Partial<Record<string, number>>;
  },
): Promise<{ items: AttentionQueueItem[]; nextCursor: string | null }> {
  const limit = Math.min(Math.max(1, Math.trunc(options.limit)), LIST_LIMIT_MAX);
  const rows = await attentionQueueQuery(tx, tenantId, { ...options, limit });
  const page = rows.slice(0, limit);
  const items: AttentionQueueItem[] = [];
  for (const row of page) {
    const op = row.op as Operation;
    const sinceMs = Number(row.sinceMs);
    const alertAfterMs = options.state === 'BROADCAST' ? (options.alertAfterMs?.[op.network] ?? null) : null;
    items.push({
      ...(await toStaffView(tx, op)),
      stateSince: new Date(sinceMs).toISOString(),
      stateAgeSeconds: Math.max(0, Math.floor((Date.now() - sinceMs) / 1000)),
      alertAfterSeconds: alertAfterMs === null ? null : Math.floor(alertAfterMs / 1000),
    });
  }
  const last = page.at(-1);
  const nextCursor = rows.length > limit && last ? encodeCursor(last.sinceText, last.op.operationId) : null;
  return { items, nextCursor };
}

/**
 * The attention queue's query for one page (`limit` + 1 rows), unexecuted so a test can EXPLAIN
 * it. Its order is computed (the time of entering the state), so it is sorted, but only over the
 * operations now in that state, which the index on (tenant, kind, state, ...) finds: in-flight
 * work, never the tenant's settled history.
 */
export function attentionQueueQuery(
  tx: Tx,
  tenantId: string,
  options: { state: 'BROADCAST' | 'UNKNOWN' | 'FAILED_TERMINAL'; cursor?: string | undefined; limit: number },
) {
  const limit = Math.min(Math.max(1, Math.trunc(options.limit)), LIST_LIMIT_MAX);
  const since = sql`coalesce((select max(t.created_at) from ${operationTransitions} t
    where t.tenant_id = ${operations.tenantId} and t.operation_id = ${operations.operationId}
      and t.to_state = ${operations.state} and t.from_state is distinct from t.to_state),
    ${operations.createdAt})`;
  const where: SQL[] = [
    eq(operations.tenantId, tenantId),
    eq(operations.kind, 'withdrawal'),
    eq(operations.state, options.state),
  ];
  if (options.cursor) {
    const { at, id: operationId } = decodeCursor(options.cursor);
    where.push(sql`(${since}, ${operations.operationId}) > (${at}::timestamptz, ${operationId}::uuid)`);
  }
  return tx
    .select({
      op: operations,
      sinceText: sql<string>`(${since})::text`,
      sinceMs: sql<number>`floor(extract(epoch from ${since}) * 1000)::float8`,
    })
    .from(operations)
    .where(and(...where))
    .orderBy(asc(since), asc(operations.operationId))
    .limit(limit + 1);
}

/**
 * Finds operations by operation id, withdrawal id (reference), account or transaction hash, at
 * most 50, newest first. Exact matches only: a search box must not become a scan of the tenant.
 */
export async function searchOperations(tx: Tx, tenantId: string, query: string) {
  return staffPage(tx, searchConditions(tenantId, query), { limit: 50 });
}

/**
 * The search's filter. Each alternative has an index of its own, so the match is a union of index
 * lookups (a bitmap OR) whatever the tenant's size: the reference under every kind
 * (`operations_tenant_kind_reference`), the account (`operations_page_account`), the hash
 * (`operations_tx_hash`, on lower(tx_hash)) and the id (the primary key).
 */
export function searchConditions(tenantId: string, query: string): SQL[] {
  const term = query.trim();
  const matches: SQL[] = [
    // Every kind named, so the (tenant, kind, reference) key is probed once per kind, not walked.
    and(inArray(operations.kind, ['withdrawal', 'deposit', 'adjustment']), eq(operations.reference, term)) ??
      sql`false`,
    eq(operations.accountRef, term),
    // As typed, or lower-cased (EVM and Bitcoin hashes are stored in lower-case hex; a base58 hash
    // is case-sensitive): equality on the column itself, which row-level security lets an index serve.
    inArray(operations.txHash, [...new Set([term, term.toLowerCase()])]),
  ];
  if (UUID_PATTERN.test(term.toLowerCase())) matches.push(eq(operations.operationId, term.toLowerCase()));
  const any = or(...matches);
  return [eq(operations.tenantId, tenantId), ...(any ? [any] : [])];
}

/** An operation's history, oldest first: every state change with actor, reason and evidence. */
export async function operationTimeline(
  tx: Tx,
  tenantId: string,
  operationId: string,
): Promise<TimelineEntry[]> {
  const rows = await tx
    .select()
    .from(operationTransitions)
    .where(
      and(eq(operationTransitions.tenantId, tenantId), eq(operationTransitions.operationId, operationId)),
    )
    .orderBy(asc(operationTransitions.seq));
  return rows.map((row) => ({
    seq: row.seq,
    fromState: row.fromState,
    toState: row.toState,
    actor: row.actor,
    reason: row.reason,
    evidence:
      row.evidence && typeof row.evidence === 'object' && !Array.isArray(row.evidence)
        ? (row.evidence as Record<string, unknown>)
        : null,
    createdAt: row.createdAt.toISOString(),
  }));
}

const EXCERPT_MAX = 2_000;

/**
 * The webhook inbox items a person must look at: unresolved quarantined deliveries and events of a
 * type we do not handle. Newest first, at most `limit` of each.
 */
export async function listInboxAttention(tx: Tx, tenantId: string, limit = 50) {
  const bound = Math.min(Math.max(limit, 1), LIST_LIMIT_MAX);
  const quarantined = await tx
    .select()
    .from(inboxQuarantine)
    .where(and(eq(inboxQuarantine.tenantId, tenantId), isNull(inboxQuarantine.resolvedAt)))
    .orderBy(desc(inboxQuarantine.receivedAt))
    .limit(bound);
  const unhandled = await tx
    .select()
    .from(inboxEvents)
    .where(and(eq(inboxEvents.tenantId, tenantId), inArray(inboxEvents.status, ['UNHANDLED'])))
    .orderBy(desc(inboxEvents.receivedAt))
    .limit(bound);
  return [
    ...quarantined.map((row) => ({
      kind: 'quarantined' as const,
      source: row.source,
      eventId: row.eventId,
      detail:
        row.reason === 'BODY_MISMATCH' ? 'same event id, different body' : 'body does not parse as its type',
      receivedAt: row.receivedAt.toISOString(),
      bodyExcerpt: row.body.slice(0, EXCERPT_MAX),
    })),
    ...unhandled.map((row) => ({
      kind: 'unhandled' as const,
      source: row.source,
      eventId: row.eventId,
      detail: `unknown event type ${row.eventType}`,
      receivedAt: row.receivedAt.toISOString(),
      bodyExcerpt: JSON.stringify(row.body).slice(0, EXCERPT_MAX),
    })),
  ].sort((a, b) => b.receivedAt.localeCompare(a.receivedAt));
}

export type AttentionState = Extract<OperationState, 'UNKNOWN' | 'FAILED_TERMINAL'>;
