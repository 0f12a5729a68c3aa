import { z } from 'zod';
import { runbookEvidenceSchema } from './runbook.ts';

/** Reconciliation breaks as staff see and close them (docs/RECONCILIATION.md). */

const uuid = z.uuid();

export const breakViewSchema = z.object({
  breakId: uuid,
  breakClass: z.string(),
  subject: z.string(),
  assetCode: z.string().nullable(),
  ledgerAmountMinor: z.string().nullable(),
  observedAmountMinor: z.string().nullable(),
  owner: z.string(),
  status: z.string(),
  openedAt: z.string(),
  closedAt: z.string().nullable(),
  closedBy: z.string().nullable(),
  closureEvidence: z.record(z.string(), z.unknown()).nullable(),
  /** resolved (a person), arrived (the item came), escalated (see the break that names it). */
  closedAs: z.enum(['resolved', 'arrived', 'escalated']).nullable(),
  /** The timing break this genuine_variance escalated (docs/RECONCILIATION.md). */
  escalatedFrom: uuid.nullable(),
  /** Why the break was opened (the finding's reason). */
  reason: z.string().nullable(),
});
export const breaksInputSchema = z.strictObject({ status: z.enum(['open', 'closed']).optional() });
export const closeBreakInputSchema = z.strictObject({ breakId: uuid, evidence: runbookEvidenceSchema });
