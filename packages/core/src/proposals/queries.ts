import type { ProposalState } from '@idem/contracts';
import { and, desc, eq, lt, or, type SQL } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { proposals } from '../db/schema/index.ts';
import { decodeCursor, encodeCursor } from '../queries/page-cursor.ts';
import { activeMembers } from './approvers.ts';
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
