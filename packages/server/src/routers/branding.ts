import { brandingSchema, explorerSettingSchema, setExplorerInputSchema } from '@idem/contracts';
import { getBranding, listExplorers, setBranding, setExplorer } from '@idem/core';
import { z } from 'zod';
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

  /** Each network's block explorer template (I14-LIVE); null where the customer sees no link. */
  explorers: staffWith('read')
    .output(z.array(explorerSettingSchema))
    .query(({ ctx }) => ctx.inTenant((tx) => listExplorers(tx, ctx.tenantId))),

  setExplorer: staffWithFresh('administer')
    .input(setExplorerInputSchema)
    .output(explorerSettingSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant((tx) => setExplorer(tx, { tenantId: ctx.tenantId, ...input, actor: ctx.actor })),
    ),
});
