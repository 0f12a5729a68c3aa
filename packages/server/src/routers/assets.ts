import { listAssetsOutputSchema } from '@idem/contracts';
import { listAssets } from '@idem/core';
import { z } from 'zod';
import { apiProcedure, router } from '../trpc.ts';

export const assetsRouter = router({
  list: apiProcedure('read')
    .input(z.strictObject({}).optional())
    .output(listAssetsOutputSchema)
    .query(({ ctx }) => ctx.inTenant((tx) => listAssets(tx, ctx.tenantId))),
});
