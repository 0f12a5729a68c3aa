import {
  controlChangeOutcomeSchema,
  freezeInputSchema,
  freezesViewSchema,
  freezeViewSchema,
  proposeUnfreezeInputSchema,
} from '@idem/contracts';
import { freeze, listFreezes, proposeUnfreeze } from '@idem/core';
import { staffWith, staffWithFresh } from '../auth/procedures.ts';
import { router } from '../trpc.ts';

/**
 * The freeze switch (docs/GOVERNANCE.md "Freeze"). Freezing is a tightening made in an incident:
 * one member with `operate` freezes at once, with no step-up to wait for; the staff procedure
 * audits it. Lifting is a loosening: an admin proposes it (with step-up), another admin approves
 * it on the Approvals screen, and the governance step applies it after the tenant's delay.
 */
export const staffFreezeRouter = router({
  /** Every freeze, in force first, and the withdrawals the ones in force hold. Anyone reads it. */
  list: staffWith('read')
    .output(freezesViewSchema)
    .query(({ ctx }) => ctx.inTenant((tx) => listFreezes(tx, ctx.tenantId))),

  freeze: staffWith('operate')
    .input(freezeInputSchema)
    .output(freezeViewSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant((tx) => freeze(tx, { tenantId: ctx.tenantId, actor: ctx.actor, request: input })),
    ),

  proposeUnfreeze: staffWithFresh('administer')
    .input(proposeUnfreezeInputSchema)
    .output(controlChangeOutcomeSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        proposeUnfreeze(tx, { tenantId: ctx.tenantId, actor: ctx.actor, freezeId: input.freezeId }),
      ),
    ),
});
