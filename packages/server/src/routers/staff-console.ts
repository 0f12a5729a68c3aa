import {
  assetViewSchema,
  breaksInputSchema,
  breakViewSchema,
  closeBreakInputSchema,
  inboxOutputSchema,
} from '@idem/contracts';
import { closeBreak, listAssets, listBreaks, listInboxAttention, type ReconciliationBreak } from '@idem/core';
import { z } from 'zod';
import { staffWith } from '../auth/procedures.ts';
import { router } from '../trpc.ts';

const breakClosureSchema = breakViewSchema.shape.closedAs.unwrap();

function toBreakView(row: ReconciliationBreak) {
  return {
    breakId: row.breakId,
    breakClass: row.breakClass,
    subject: row.subject,
    assetCode: row.assetCode,
    ledgerAmountMinor: row.ledgerAmountMinor,
    observedAmountMinor: row.observedAmountMinor,
    owner: row.owner,
    status: row.status,
    openedAt: row.openedAt.toISOString(),
    closedAt: row.closedAt?.toISOString() ?? null,
    closedBy: row.closedBy,
    closureEvidence:
      row.closureEvidence && typeof row.closureEvidence === 'object'
        ? (row.closureEvidence as Record<string, unknown>)
        : null,
    closedAs: breakClosureSchema.nullable().parse(row.closedAs),
    escalatedFrom: row.escalatedFrom,
    reason: z.object({ reason: z.string() }).safeParse(row.details).data?.reason ?? null,
  };
}

/** Webhook inbox, reconciliation breaks and the tenant's assets, for the staff screens. */
export const staffConsoleRouter = router({
  inbox: staffWith('read')
    .output(inboxOutputSchema)
    .query(({ ctx }) => ctx.inTenant((tx) => listInboxAttention(tx, ctx.tenantId))),

  breaks: staffWith('read')
    .input(breaksInputSchema)
    .output(z.array(breakViewSchema))
    .query(({ ctx, input }) =>
      ctx.inTenant(async (tx) =>
        (
          await listBreaks(tx, { tenantId: ctx.tenantId, ...(input.status ? { status: input.status } : {}) })
        ).map(toBreakView),
      ),
    ),

  /** Closes a break with the evidence found (C21); nothing adjusts a balance. */
  closeBreak: staffWith('operate')
    .input(closeBreakInputSchema)
    .output(breakViewSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant(async (tx) =>
        toBreakView(
          await closeBreak(tx, {
            tenantId: ctx.tenantId,
            breakId: input.breakId,
            closedBy: ctx.actor,
            evidence: { ...input.evidence },
          }),
        ),
      ),
    ),

  assets: staffWith('read')
    .output(z.array(assetViewSchema))
    .query(({ ctx }) => ctx.inTenant((tx) => listAssets(tx, ctx.tenantId))),
});
