import { getBalancesInputSchema, getBalancesOutputSchema } from '@idem/contracts';
import { getBalances } from '@idem/core';
import { router, tenantProcedure } from '../trpc.ts';

export const balancesRouter = router({
  /** An account's available and held amounts per asset, in minor units; empty for an unknown account. */
  get: tenantProcedure
    .input(getBalancesInputSchema)
    .output(getBalancesOutputSchema)
    .query(({ ctx, input }) => ctx.inTenant((tx) => getBalances(tx, ctx.tenantId, input.accountId))),
});
