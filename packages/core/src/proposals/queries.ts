import { type ProposalState, type ProposalView, roleAllows, type StaffRole } from '@idem/contracts';
import { and, asc, desc, eq, gt, lt, ne, or, type SQL, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { proposals } from '../db/schema/index.ts';
import { decodeCursor, encodeCursor } from '../queries/page-cursor.ts';
import { activeMembers } from './approvers.ts';
import { PROPOSAL_RULES } from './kinds.ts';
import { decisionsOf, type ProposalRecord, proposalView } from './record.ts';

/** Proposals newest first, optionally by state or target operation, keyed on (created_at, id). */
export async function listProposals(
  tx: Tx,
  tenantId: string,
  options: {
    state?: ProposalState | undefined;
    targetOperationId?: string | undefined;
    cursor?: string | undefined;
    limit: number;
  },
) {
  const where: SQL[] = [eq(proposals.tenantId, tenantId)];
  if (options.state) where.push(eq(proposals.state, options.state));
  if (options.targetOperationId) where.push(eq(proposals.targetOperationId, options.targetOperationId));
  if (options.cursor) {
    const { at, id: proposalId } = decodeCursor(options.cursor);
    const createdAt = new Date(at);
    const after = or(
      lt(proposals.createdAt, createdAt),
      and(eq(proposals.createdAt, createdAt), lt(proposals.proposalId, proposalId)),
    );
    if (after) where.push(after);
  }
  const limit = Math.min(Math.max(1, Math.trunc(options.limit)), 100);
  const rows = (await tx
    .select()
    .from(proposals)
    .where(and(...where))
    .orderBy(desc(proposals.createdAt), desc(proposals.proposalId))
    .limit(limit + 1)) as ProposalRecord[];
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const nextCursor =
    rows.length > limit && last ? encodeCursor(last.createdAt.toISOString(), last.proposalId) : null;
  const decisions = await decisionsOf(
    tx,
    tenantId,
    page.map((row) => row.proposalId),
  );
  const members = await activeMembers(tx, tenantId);
  const items = page.map((row) => proposalView(row, decisions.get(row.proposalId) ?? [], members));
  return { items, nextCursor };
}

/** How many pending proposals one look at "waiting for me" reads at most (oldest first). */
const AWAITING_SCAN_MAX = 200;

/**
 * The pending proposals waiting for one member's decision, oldest first: not expired, not
 * proposed by them, not yet decided by them, and of a kind whose approver permission their role
 * holds (the same rule the decision applies), so the list never offers what the server would refuse.
 */
export async function proposalsAwaiting(
  tx: Tx,
  tenantId: string,
  member: { actor: string; role: StaffRole },
  limit = 50,
): Promise<ProposalView[]> {
  const rows = (await tx
    .select()
    .from(proposals)
    .where(
      and(
        eq(proposals.tenantId, tenantId),
        eq(proposals.state, 'PENDING'),
        ne(proposals.proposedBy, member.actor),
        gt(proposals.expiresAt, sql`now()`),
      ),
    )
    .orderBy(asc(proposals.createdAt), asc(proposals.proposalId))
    .limit(AWAITING_SCAN_MAX)) as ProposalRecord[];
  const mayDecide = rows.filter((row) =>
    roleAllows(member.role, PROPOSAL_RULES[row.kind].approverPermission),
  );
  const decisions = await decisionsOf(
    tx,
    tenantId,
    mayDecide.map((row) => row.proposalId),
  );
  const undecided = mayDecide.filter(
    (row) => !(decisions.get(row.proposalId) ?? []).some((d) => d.approver === member.actor),
  );
  const members = await activeMembers(tx, tenantId);
  return undecided
    .slice(0, Math.min(Math.max(1, Math.trunc(limit)), 100))
    .map((row) => proposalView(row, decisions.get(row.proposalId) ?? [], members));
}
