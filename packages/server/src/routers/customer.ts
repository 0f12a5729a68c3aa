import {
  assetViewSchema,
  balanceViewSchema,
  customerMeSchema,
  customerOperationDetailSchema,
  customerWithdrawInputSchema,
  operationIdInputSchema,
  operationPageSchema,
  pageInputSchema,
  withdrawOutputSchema,
} from '@idem/contracts';
import {
  getAccountWithdrawal,
  getBalances,
  getBranding,
  listAccountWithdrawals,
  listAssets,
  listOperations,
  parseWebToken,
  revokeWebSession,
  submitWebWithdrawal,
  toView,
} from '@idem/core';
import { z } from 'zod';
import { customerProcedure } from '../auth/procedures.ts';
import { CUSTOMER_COOKIE } from '../auth/web-request.ts';
import { router } from '../trpc.ts';

/** The customer screens: one account of one tenant, as the session says; never an input. */
export const customerRouter = router({
  me: customerProcedure.output(customerMeSchema).query(async ({ ctx }) => ({
    tenantId: ctx.tenantId,
    accountId: ctx.accountRef,
    csrfToken: ctx.csrfToken,
    expiresAt: ctx.customer.expiresAt.toISOString(),
    branding: await ctx.inTenant((tx) => getBranding(tx, ctx.tenantId)),
  })),

  signOut: customerProcedure.mutation(async ({ ctx }) => {
    const parsed = parseWebToken(ctx.web.cookies[CUSTOMER_COOKIE] ?? '');
    if (parsed) await ctx.inTenant((tx) => revokeWebSession(tx, parsed));
    ctx.web.setCookie(CUSTOMER_COOKIE, '', { maxAgeSeconds: 0 });
    return { signedOut: true };
  }),

  /** Balances in minor units with each asset's decimals and network, for exact display. */
  balances: customerProcedure
    .output(z.object({ assets: z.array(assetViewSchema), balances: z.array(balanceViewSchema) }))
    .query(({ ctx }) =>
      ctx.inTenant(async (tx) => ({
        assets: await listAssets(tx, ctx.tenantId),
        balances: await getBalances(tx, ctx.tenantId, ctx.accountRef),
      })),
    ),

  /**
   * Submits the intent's withdrawal, or replays it (REPLAYED). A withdrawal stored REJECTED for
   * insufficient funds is returned as such, not thrown: the screen explains it.
   */
  withdraw: customerProcedure
    .input(customerWithdrawInputSchema)
    .output(withdrawOutputSchema)
    .mutation(async ({ ctx, input }) => {
      const claim = await ctx.inTenant((tx) =>
        submitWebWithdrawal(tx, {
          tenantId: ctx.tenantId,
          accountRef: ctx.accountRef,
          actor: ctx.actor,
          intentId: input.intentId,
          asset: input.asset,
          destination: input.destination,
          memo: input.memo,
          amountMinor: input.amountMinor,
          duplicateCheck: { confirmDuplicateOf: input.confirmDuplicateOf },
        }),
      );
      return { outcome: claim.outcome, withdrawal: toView(claim.operation) };
    }),

  withdrawals: customerProcedure
    .input(pageInputSchema)
    .output(operationPageSchema)
    .query(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        listAccountWithdrawals(tx, ctx.tenantId, ctx.accountRef, {
          cursor: input.cursor,
          limit: input.limit,
        }),
      ),
    ),

  /** The account's credited (and reversed) deposits, newest first; the session names the account. */
  deposits: customerProcedure
    .input(pageInputSchema)
    .output(operationPageSchema)
    .query(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        listOperations(tx, ctx.tenantId, {
          kind: 'deposit',
          accountRef: ctx.accountRef,
          limit: input.limit,
          ...(input.cursor ? { cursor: input.cursor } : {}),
        }),
      ),
    ),

  withdrawal: customerProcedure
    .input(operationIdInputSchema)
    .output(customerOperationDetailSchema)
    .query(({ ctx, input }) =>
      ctx.inTenant((tx) => getAccountWithdrawal(tx, ctx.tenantId, ctx.accountRef, input.operationId)),
    ),
});
