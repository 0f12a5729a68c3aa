import {
  controlChangeOutcomeSchema,
  freezeInputSchema,
  freezesViewSchema,
  freezeTripSettingsSchema,
  freezeTripsViewSchema,
  freezeTripViewSchema,
  freezeViewSchema,
  proposeUnfreezeInputSchema,
} from '@idem/contracts';
import { freeze, listFreezes, listFreezeTrips, proposeUnfreeze, setFreezeTrip } from '@idem/core';
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

  /** The automatic trips (docs/GOVERNANCE.md "Automatic trips"), with any loosening waiting. */
  trips: staffWith('read')
    .output(freezeTripsViewSchema)
    .query(({ ctx }) => ctx.inTenant((tx) => listFreezeTrips(tx, ctx.tenantId))),

  /**
   * One row of trips (the tenant's, or one asset's), by an admin with step-up: a trip turned on or
   * made stricter applies at once; off or looser is proposed to the other admins (PROPOSED, with
   * the proposal to approve) and applies after the tenant's delay.
   */
  setTrip: staffWithFresh('administer')
    .input(freezeTripSettingsSchema)
    .output(controlChangeOutcomeSchema.extend({ trip: freezeTripViewSchema.nullable() }))
    .mutation(({ ctx, input }) =>
      ctx.inTenant((tx) => setFreezeTrip(tx, { tenantId: ctx.tenantId, actor: ctx.actor, settings: input })),
    ),
});
