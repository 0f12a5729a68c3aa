import type { ProposalState } from '@idem/contracts';
import { IdemError } from '@idem/contracts';
import { and, desc, eq, lt, or, type SQL } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { proposals } from '../db/schema/index.ts';
import { type ProposalRecord, toProposalView } from './record.ts';

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

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
    const { createdAt, proposalId } = decodeCursor(options.cursor);
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
    rows.length > limit && last
      ? Buffer.from(`${last.createdAt.toISOString()}|${last.proposalId}`).toString('base64url')
      : null;
  const items = [];
  for (const row of page) items.push(await toProposalView(tx, row));
  return { items, nextCursor };
}

function decodeCursor(cursor: string): { createdAt: Date; proposalId: string } {
  const [iso, proposalId] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const createdAt = new Date(iso ?? '');
  if (!proposalId || Number.isNaN(createdAt.getTime()) || !UUID_PATTERN.test(proposalId)) {
    throw new IdemError('VALIDATION', 'cursor is not one this API returned', {
      issues: [{ path: 'cursor', message: 'invalid cursor' }],
    });
  }
  return { createdAt, proposalId };
}
