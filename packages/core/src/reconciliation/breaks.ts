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

/** How a closed break ended (C21): a person resolved it, the item arrived, or it escalated. */
export type BreakClosure = 'resolved' | 'arrived' | 'escalated';

export interface BreakFinding {
  tenantId: string;
  breakClass: BreakClass;
  subject: string;
  assetCode?: string | null;
  ledgerAmountMinor?: string | null;
  observedAmountMinor?: string | null;
  details: Record<string, unknown>;
  owner?: string;
}

/**
 * Records a difference between the ledger and custody or the chain. One open break per subject:
 * a repeated finding returns the open break instead of opening another, except that a
 * genuine_variance finding never hides behind an open timing break: it escalates it (a new break
 * linked to the old, which closes as escalated). Nothing here, or anywhere, adjusts a balance
 * because of a break.
 */
export async function openBreak(
  tx: Tx,
  input: BreakFinding,
): Promise<{ opened: boolean; break: ReconciliationBreak; escalated?: ReconciliationBreak }> {
  const inserted = await tx
    .insert(reconciliationBreaks)
    .values(rowOf(input))
    .onConflictDoNothing()
    .returning();
  const created = inserted[0];
  if (created) return { opened: true, break: created };
  const open = await openBreakOf(tx, input.tenantId, input.subject);
  if (!open) throw new Error('openBreak: conflict without an open break for the subject');
  if (open.breakClass === 'timing' && input.breakClass === 'genuine_variance') {
    const escalated = await escalateBreak(tx, {
      tenantId: input.tenantId,
      breakId: open.breakId,
      escalatedBy: String(input.details.foundBy ?? 'reconciliation'),
      finding: input,
      evidence: { reason: 'a genuine variance was found on the subject of this timing break' },
    });
    return { opened: true, break: escalated.break, escalated: escalated.closed };
  }
  return { opened: false, break: open };
}

/**
 * Escalates an open timing break: it closes as escalated with evidence, and a new genuine_variance
 * break of the same subject names it (the database checks the link and that both happen together).
 */
export async function escalateBreak(
  tx: Tx,
  input: {
    tenantId: string;
    breakId: string;
    escalatedBy: string;
    finding: Omit<BreakFinding, 'tenantId' | 'breakClass'>;
    evidence: Record<string, unknown>;
  },
): Promise<{ closed: ReconciliationBreak; break: ReconciliationBreak }> {
  const successorId = randomUUID();
  const closed = await closeBreak(tx, {
    tenantId: input.tenantId,
    breakId: input.breakId,
    closedBy: input.escalatedBy,
    closedAs: 'escalated',
    evidence: { ...input.evidence, escalatedTo: successorId },
  });
  if (closed.breakClass !== 'timing' || closed.subject !== input.finding.subject) {
    throw new IdemError('INVALID_TRANSITION', 'only a timing break of the same subject escalates');
  }
  const [created] = await tx
    .insert(reconciliationBreaks)
    .values({
      ...rowOf({ ...input.finding, tenantId: input.tenantId, breakClass: 'genuine_variance' }),
      breakId: successorId,
      assetCode: input.finding.assetCode ?? closed.assetCode,
      ledgerAmountMinor: input.finding.ledgerAmountMinor ?? closed.ledgerAmountMinor,
      observedAmountMinor: input.finding.observedAmountMinor ?? closed.observedAmountMinor,
      escalatedFrom: closed.breakId,
    })
    .returning();
  if (!created) throw new Error('escalateBreak: the escalated break was not inserted');
  return { closed, break: created };
}

/** Closes an open break; closure evidence is required and the closed record is final. */
export async function closeBreak(
  tx: Tx,
  input: {
    tenantId: string;
    breakId: string;
    closedBy: string;
    evidence: Record<string, unknown>;
    /** Default `resolved` (a person); `arrived` and `escalated` are reconciliation's own closures. */
    closedAs?: BreakClosure;
  },
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
      closedAs: input.closedAs ?? 'resolved',
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

/** Open breaks of one class (reconciliation closes or escalates its own timing breaks). */
export async function openBreaksOfClass(
  tx: Tx,
  input: { tenantId: string; breakClass: BreakClass; limit?: number },
): Promise<ReconciliationBreak[]> {
  return tx
    .select()
    .from(reconciliationBreaks)
    .where(
      and(
        eq(reconciliationBreaks.tenantId, input.tenantId),
        eq(reconciliationBreaks.breakClass, input.breakClass),
        eq(reconciliationBreaks.status, 'open'),
      ),
    )
    .orderBy(reconciliationBreaks.openedAt)
    .limit(Math.min(Math.max(input.limit ?? 10_000, 1), 10_000));
}

async function openBreakOf(tx: Tx, tenantId: string, subject: string): Promise<ReconciliationBreak | null> {
  const rows = await tx
    .select()
    .from(reconciliationBreaks)
    .where(
      and(
        eq(reconciliationBreaks.tenantId, tenantId),
        eq(reconciliationBreaks.subject, subject),
        eq(reconciliationBreaks.status, 'open'),
      ),
    )
    .for('update');
  return rows[0] ?? null;
}

function rowOf(input: BreakFinding) {
  return {
    tenantId: input.tenantId,
    breakId: randomUUID(),
    breakClass: input.breakClass,
    subject: input.subject,
    assetCode: input.assetCode ?? null,
    ledgerAmountMinor: input.ledgerAmountMinor ?? null,
    observedAmountMinor: input.observedAmountMinor ?? null,
    details: input.details,
    owner: input.owner ?? DEFAULT_BREAK_OWNERS[input.breakClass],
  };
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
