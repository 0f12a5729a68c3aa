import {
  assetViewSchema,
  breaksInputSchema,
  breakViewSchema,
  closeBreakInputSchema,
  deliveryListInputSchema,
  inboxOutputSchema,
  redeliverInputSchema,
  webhookDeliverySchema,
} from '@idem/contracts';
import {
  closeBreak,
  listAssets,
  listBreaks,
  listDeliveries,
  listInboxAttention,
  type ReconciliationBreak,
  redeliver,
} from '@idem/core';
import { z } from 'zod';
import { staffWith, staffWithFresh } from '../auth/procedures.ts';
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

/** Webhook inbox and outbound delivery log, reconciliation breaks and the tenant's assets, for the staff screens. */
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
  closeBreak: staffWithFresh('operate')
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

  /** The outbound delivery log: one line per notification and endpoint, newest first. */
  deliveries: staffWith('read')
    .input(deliveryListInputSchema)
    .output(z.object({ items: z.array(webhookDeliverySchema), nextCursor: z.string().nullable() }))
    .query(({ ctx, input }) => ctx.inTenant((tx) => listDeliveries(tx, ctx.tenantId, input))),

  /** Sends a delivery again by hand: same webhook id and body, a fresh round of attempts. */
  redeliver: staffWith('operate')
    .input(redeliverInputSchema)
    .output(webhookDeliverySchema)
    .mutation(({ ctx, input }) => ctx.inTenant((tx) => redeliver(tx, ctx.tenantId, input))),

  assets: staffWith('read')
    .output(z.array(assetViewSchema))
    .query(({ ctx }) => ctx.inTenant((tx) => listAssets(tx, ctx.tenantId))),
});
