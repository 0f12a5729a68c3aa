import { createHash } from 'node:crypto';
import type { ProposalKind, ProposalState, ProposalView, StaffRole } from '@idem/contracts';
import { IdemError } from '@idem/contracts';
import canonicalize from 'canonicalize';
import { and, asc, eq, inArray } from 'drizzle-orm';
import type { Executor } from '../db/connect.ts';
import { proposalDecisions, proposals } from '../db/schema/index.ts';
import { activeMembers, counts } from './approvers.ts';
import { PROPOSAL_RULES } from './kinds.ts';

export type ProposalRecord = typeof proposals.$inferSelect & { kind: ProposalKind; state: ProposalState };

/**
 * The hash an approver binds: SHA-256 (hex) of the RFC 8785 canonical JSON of the tenant, the kind,
 * the payload and the evidence shown. Changing any of them is a different proposal.
 */
export function proposalHash(input: {
  tenantId: string;
  kind: ProposalKind;
  payload: unknown;
  evidence: Record<string, unknown> | null;
}): string {
  const canonical = canonicalize({
    tenantId: input.tenantId,
    kind: input.kind,
    payload: input.payload,
    evidence: input.evidence,
  });
  if (canonical === undefined) throw new Error('proposal could not be canonicalised');
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}

export async function findProposal(
  db: Executor,
  tenantId: string,
  proposalId: string,
): Promise<ProposalRecord | null> {
  const rows = await db
    .select()
    .from(proposals)
    .where(and(eq(proposals.tenantId, tenantId), eq(proposals.proposalId, proposalId)));
  return (rows[0] as ProposalRecord | undefined) ?? null;
}

export async function getProposal(
  db: Executor,
  tenantId: string,
  proposalId: string,
): Promise<ProposalRecord> {
  const found = await findProposal(db, tenantId, proposalId);
  if (!found) throw new IdemError('NOT_FOUND', 'no such proposal');
  return found;
}

/** The proposal as staff see it: what was proposed, the evidence, who decided and who must. */
export async function toProposalView(db: Executor, p: ProposalRecord): Promise<ProposalView> {
  const decisions = await decisionsOf(db, p.tenantId, [p.proposalId]);
  return proposalView(p, decisions.get(p.proposalId) ?? [], await activeMembers(db, p.tenantId));
}

export type ProposalDecisionRow = typeof proposalDecisions.$inferSelect;

/** The decisions on several proposals in one query, each list in the order they were made. */
export async function decisionsOf(
  db: Executor,
  tenantId: string,
  proposalIds: string[],
): Promise<Map<string, ProposalDecisionRow[]>> {
  const byProposal = new Map<string, ProposalDecisionRow[]>();
  if (proposalIds.length === 0) return byProposal;
  const rows = await db
    .select()
    .from(proposalDecisions)
    .where(and(eq(proposalDecisions.tenantId, tenantId), inArray(proposalDecisions.proposalId, proposalIds)))
    .orderBy(asc(proposalDecisions.createdAt));
  for (const row of rows) {
    const list = byProposal.get(row.proposalId) ?? [];
    list.push(row);
    byProposal.set(row.proposalId, list);
  }
  return byProposal;
}

/** The view; `members` (activeMembers) decides which approvals still count. */
export function proposalView(
  p: ProposalRecord,
  decisions: ProposalDecisionRow[],
  members: Map<string, StaffRole>,
): ProposalView {
  const permission = PROPOSAL_RULES[p.kind].approverPermission;
  return {
    proposalId: p.proposalId,
    kind: p.kind,
    state: p.state,
    payload: p.payload as Record<string, unknown>,
    evidence: (p.evidence as Record<string, unknown> | null) ?? null,
    payloadHash: p.payloadHash,
    targetOperationId: p.targetOperationId,
    proposedBy: p.proposedBy,
    proposedAt: p.createdAt.toISOString(),
    approvalsRequired: p.approvalsRequired,
    approvalsGiven: decisions.filter(
      (d) =>
        d.decision === 'approve' &&
        d.payloadHash === p.payloadHash &&
        d.approver !== p.proposedBy &&
        counts(members, d.approver, permission),
    ).length,
    expiresAt: p.expiresAt.toISOString(),
    effectiveAt: p.effectiveAt?.toISOString() ?? null,
    decisions: decisions.map((d) => ({
      approver: d.approver,
      decision: d.decision as 'approve' | 'reject',
      reason: d.reason,
      passkeyCredentialId: (d.passkeyAssertion as { credentialId?: string } | null)?.credentialId ?? null,
      decidedAt: d.createdAt.toISOString(),
    })),
    result: (p.result as Record<string, unknown> | null) ?? null,
    decidedAt: p.decidedAt?.toISOString() ?? null,
  };
}
