import { randomUUID } from 'node:crypto';
import { IdemError, type ProposalKind, type ProposeInput, proposeInputSchema } from '@idem/contracts';
import canonicalize from 'canonicalize';
import { and, eq, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { errorCodes } from '../db/error-codes.ts';
import { proposals } from '../db/schema/index.ts';
import { parseOrThrow } from '../operations/input-validation.ts';
import { governanceOf } from '../tenants/governance.ts';
import { PROPOSAL_RULES } from './kinds.ts';
import { type ProposalRecord, proposalHash } from './record.ts';

export interface ProposeResult {
  outcome: 'CREATED' | 'REPLAYED';
  proposal: ProposalRecord;
}

/**
 * One staff member proposes an action that moves or releases money. The rule of its kind checks
 * it, names the evidence bound into its hash and how many approvers it needs (by amount, ./tiers.ts);
 * nothing moves until other staff approve it (`decideProposal`) before it expires (the tenant's
 * proposal lifetime). Retried with the same key and payload it replays; the same key with another
 * payload is IDEMPOTENCY_CONFLICT. A second open proposal for the same operation is refused too.
 */
export async function propose(
  tx: Tx,
  input: {
    tenantId: string;
    actor: string;
    request: unknown;
    /** Evidence the system gathered outside the database (e.g. the rail's answer), bound into the hash. */
    gathered?: Record<string, unknown> | null;
  },
): Promise<ProposeResult> {
  const request: ProposeInput = parseOrThrow(proposeInputSchema, input.request);
  return proposeParsed(tx, { ...input, request });
}

/** A proposal request already checked against its kind's schema (or built by core itself). */
export interface ParsedProposal {
  kind: ProposalKind;
  idempotencyKey: string;
  payload: Record<string, unknown>;
}

/**
 * `propose` after parsing: also the way in for kinds staff cannot send as such (control changes,
 * ../proposals/control.ts, which check who proposes first).
 */
export async function proposeParsed(
  tx: Tx,
  input: {
    tenantId: string;
    actor: string;
    request: ParsedProposal;
    gathered?: Record<string, unknown> | null;
  },
): Promise<ProposeResult> {
  const { request } = input;
  const rule = PROPOSAL_RULES[request.kind];
  const existing = await byKey(tx, input.tenantId, request.idempotencyKey);
  if (existing) return replayOrConflict(existing, request);

  const context = { tenantId: input.tenantId, payload: request.payload, gathered: input.gathered ?? null };
  const prepared = await rule.prepare(tx, context);
  const approvalsRequired = await rule.approvalsRequired(tx, context);
  const { proposalTtlSeconds } = await governanceOf(tx, input.tenantId);
  const payloadHash = proposalHash({
    tenantId: input.tenantId,
    kind: request.kind,
    payload: request.payload,
    evidence: prepared.evidence,
  });
  try {
    // A savepoint, so a refused insert leaves the caller's transaction usable (see STACK.md).
    const inserted = await tx.transaction(async (sp) =>
      sp
        .insert(proposals)
        .values({
          tenantId: input.tenantId,
          proposalId: randomUUID(),
          kind: request.kind,
          idempotencyKey: request.idempotencyKey,
          targetOperationId: prepared.targetOperationId,
          payload: request.payload,
          evidence: prepared.evidence,
          payloadHash,
          proposedBy: input.actor,
          approvalsRequired,
          // On the database's clock, like created_at: the lifetime is exact whatever the app's clock.
          expiresAt: sql`now() + make_interval(secs => ${proposalTtlSeconds})`,
        })
        .onConflictDoNothing({ target: [proposals.tenantId, proposals.idempotencyKey] })
        .returning(),
    );
    const created = inserted[0] as ProposalRecord | undefined;
    if (created) return { outcome: 'CREATED', proposal: created };
  } catch (error) {
    if (!errorCodes(error).includes('23505')) throw error;
    const open = await openProposalFor(tx, input.tenantId, prepared.targetOperationId);
    throw new IdemError(
      'IDEMPOTENCY_CONFLICT',
      `another proposal for this operation is awaiting approval${open ? ` (${open.proposalId})` : ''}`,
    );
  }
  // A concurrent proposer won the key between our read and our insert.
  const winner = await byKey(tx, input.tenantId, request.idempotencyKey);
  if (!winner) throw new Error('proposal key conflict without a holder');
  return replayOrConflict(winner, request);
}

/** The proposer takes back a proposal nobody has completed yet. */
export async function cancelProposal(
  tx: Tx,
  input: { tenantId: string; proposalId: string; actor: string },
): Promise<ProposalRecord> {
  const rows = await tx
    .update(proposals)
    .set({ state: 'CANCELLED', decidedAt: sql`now()`, result: { cancelledBy: input.actor } })
    .where(
      and(
        eq(proposals.tenantId, input.tenantId),
        eq(proposals.proposalId, input.proposalId),
        eq(proposals.state, 'PENDING'),
        eq(proposals.proposedBy, input.actor),
      ),
    )
    .returning();
  const cancelled = rows[0] as ProposalRecord | undefined;
  if (cancelled) return cancelled;
  throw new IdemError(
    'INVALID_TRANSITION',
    'only the proposer can cancel, and only while it awaits approval',
  );
}

function replayOrConflict(existing: ProposalRecord, request: ParsedProposal): ProposeResult {
  // Compared on kind and payload, not evidence: a retry may see the rail answer differently.
  if (existing.kind === request.kind && canonicalize(existing.payload) === canonicalize(request.payload)) {
    return { outcome: 'REPLAYED', proposal: existing };
  }
  throw new IdemError('IDEMPOTENCY_CONFLICT', 'this key already names a different proposal', {
    holderKey: existing.idempotencyKey,
  });
}

async function byKey(tx: Tx, tenantId: string, key: string): Promise<ProposalRecord | null> {
  const rows = await tx
    .select()
    .from(proposals)
    .where(and(eq(proposals.tenantId, tenantId), eq(proposals.idempotencyKey, key)));
  return (rows[0] as ProposalRecord | undefined) ?? null;
}

async function openProposalFor(
  tx: Tx,
  tenantId: string,
  operationId: string | null,
): Promise<ProposalRecord | null> {
  if (!operationId) return null;
  const rows = await tx
    .select()
    .from(proposals)
    .where(
      and(
        eq(proposals.tenantId, tenantId),
        eq(proposals.targetOperationId, operationId),
        eq(proposals.state, 'PENDING'),
      ),
    );
  return (rows[0] as ProposalRecord | undefined) ?? null;
}
