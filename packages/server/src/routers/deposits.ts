import { listDepositsInputSchema, listDepositsOutputSchema } from '@idem/contracts';
import { listOperations } from '@idem/core';
import { apiProcedure, router } from '../trpc.ts';

export const depositsRouter = router({
  /** Credited (and reversed) deposits, newest first; one account's with `accountId`. */
  list: apiProcedure('read')
    .input(listDepositsInputSchema)
    .output(listDepositsOutputSchema)
    .query(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        listOperations(tx, ctx.tenantId, {
          kind: 'deposit',
          limit: input.limit,
          ...(input.accountId ? { accountRef: input.accountId } : {}),
          ...(input.cursor ? { cursor: input.cursor } : {}),
        }),
      ),
    ),
});
