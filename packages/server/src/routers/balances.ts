import { getBalancesInputSchema, getBalancesOutputSchema } from '@idem/contracts';
import { getBalances } from '@idem/core';
import { apiProcedure, router } from '../trpc.ts';

export const balancesRouter = router({
  /** An account's available and held amounts per asset, in minor units; empty for an unknown account. */
  get: apiProcedure('read')
    .input(getBalancesInputSchema)
    .output(getBalancesOutputSchema)
    .query(({ ctx, input }) => ctx.inTenant((tx) => getBalances(tx, ctx.tenantId, input.accountId))),
});
