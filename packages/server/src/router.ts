import { assetsRouter } from './routers/assets.ts';
import { balancesRouter } from './routers/balances.ts';
import { withdrawalsRouter } from './routers/withdrawals.ts';
import { router } from './trpc.ts';

/** Names to procedures; each procedure lives in its router file with its schemas. */
export const appRouter = router({
  withdrawals: withdrawalsRouter,
  balances: balancesRouter,
  assets: assetsRouter,
});

export type AppRouter = typeof appRouter;
