import { brandingSchema } from '@idem/contracts';
import { getBranding, setBranding } from '@idem/core';
import { staffWith, staffWithFresh } from '../auth/procedures.ts';
import { router } from '../trpc.ts';

/** The tenant's brand; the customer screens read it with their session (customer.me). */
export const brandingRouter = router({
  get: staffWith('read')
    .output(brandingSchema)
    .query(({ ctx }) => ctx.inTenant((tx) => getBranding(tx, ctx.tenantId))),

  set: staffWithFresh('administer')
    .input(brandingSchema)
    .output(brandingSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant((tx) => setBranding(tx, { tenantId: ctx.tenantId, branding: input, actor: ctx.actor })),
    ),
});
