import { randomUUID } from 'node:crypto';
import { IdemError } from '@idem/contracts';
import { and, desc, eq, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { reconciliationBreaks } from '../db/schema/index.ts';

export type BreakClass = 'timing' | 'unknown_operation' | 'genuine_variance';
export type ReconciliationBreak = typeof reconciliationBreaks.$inferSelect;

/** Who owns a break of each class unless the finding names someone (C21). */
export const DEFAULT_BREAK_OWNERS: Record<BreakClass, string> = {
  timing: 'ops-reconciliation',
  unknown_operation: 'ops-reconciliation',
  genuine_variance: 'finance-controller',
};

/**
 * Records a difference between the ledger and custody or the chain. One open break per subject:
 * a repeated finding returns the open break instead of opening another. Nothing here, or anywhere,
 * adjusts a balance because of a break.
 */
export async function openBreak(
  tx: Tx,
  input: {
    tenantId: string;
    breakClass: BreakClass;
    subject: string;
    assetCode?: string | null;
    ledgerAmountMinor?: string | null;
    observedAmountMinor?: string | null;
    details: Record<string, unknown>;
    owner?: string;
  },
): Promise<{ opened: boolean; break: ReconciliationBreak }> {
  const inserted = await tx
    .insert(reconciliationBreaks)
    .values({
      tenantId: input.tenantId,
      breakId: randomUUID(),
      breakClass: input.breakClass,
      subject: input.subject,
      assetCode: input.assetCode ?? null,
      ledgerAmountMinor: input.ledgerAmountMinor ?? null,
      observedAmountMinor: input.observedAmountMinor ?? null,
      details: input.details,
      owner: input.owner ?? DEFAULT_BREAK_OWNERS[input.breakClass],
    })
    .onConflictDoNothing()
    .returning();
  const created = inserted[0];
  if (created) return { opened: true, break: created };
  const existing = await tx
    .select()
    .from(reconciliationBreaks)
    .where(
      and(
        eq(reconciliationBreaks.tenantId, input.tenantId),
        eq(reconciliationBreaks.subject, input.subject),
        eq(reconciliationBreaks.status, 'open'),
      ),
    );
  const open = existing[0];
  if (!open) throw new Error('openBreak: conflict without an open break for the subject');
  return { opened: false, break: open };
}

/** Closes an open break; closure evidence is required and the closed record is final. */
export async function closeBreak(
  tx: Tx,
  input: { tenantId: string; breakId: string; closedBy: string; evidence: Record<string, unknown> },
): Promise<ReconciliationBreak> {
  if (Object.keys(input.evidence).length === 0) {
    throw new IdemError('VALIDATION', 'closing a break needs evidence of what was found');
  }
  const updated = await tx
    .update(reconciliationBreaks)
    .set({
      status: 'closed',
      closedAt: sql`now()`,
      closedBy: input.closedBy,
      closureEvidence: input.evidence,
    })
    .where(
      and(
        eq(reconciliationBreaks.tenantId, input.tenantId),
        eq(reconciliationBreaks.breakId, input.breakId),
        eq(reconciliationBreaks.status, 'open'),
      ),
    )
    .returning();
  const closed = updated[0];
  if (!closed) throw new IdemError('NOT_FOUND', 'no open break with this id');
  return closed;
}

export async function listBreaks(
  tx: Tx,
  input: { tenantId: string; status?: 'open' | 'closed'; limit?: number },
): Promise<ReconciliationBreak[]> {
  const conditions = [eq(reconciliationBreaks.tenantId, input.tenantId)];
  if (input.status) conditions.push(eq(reconciliationBreaks.status, input.status));
  return tx
    .select()
    .from(reconciliationBreaks)
    .where(and(...conditions))
    .orderBy(desc(reconciliationBreaks.openedAt))
    .limit(Math.min(Math.max(input.limit ?? 100, 1), 500));
}
