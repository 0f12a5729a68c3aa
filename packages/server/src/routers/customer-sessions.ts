import {
  createCustomerSessionInputSchema,
  createCustomerSessionOutputSchema,
  customerMeSchema,
  exchangeCustomerLinkInputSchema,
  IdemError,
} from '@idem/contracts';
import {
  CUSTOMER_LINK_MS_DEFAULT,
  createCustomerLink,
  getBranding,
  parseWebToken,
  redeemCustomerLink,
  withTenant,
} from '@idem/core';
import { assertSameOrigin, CUSTOMER_COOKIE, csrfTokenFor, requireWeb } from '../auth/web-request.ts';
import { apiProcedure, publicProcedure, router } from '../trpc.ts';

export const customerSessionsRouter = router({
  /**
   * For the operator's backend (API key): a one-time link that opens a short-lived session for one
   * account, like a server-made session for an embedded payment component. The token travels in
   * the URL fragment, so it is never sent to a server log or in a Referer header.
   */
  create: apiProcedure('customer-sessions')
    .input(createCustomerSessionInputSchema)
    .output(createCustomerSessionOutputSchema)
    .mutation(async ({ ctx, input }) => {
      const ttlMs = input.expiresInSeconds ? input.expiresInSeconds * 1000 : CUSTOMER_LINK_MS_DEFAULT;
      const link = await ctx.inTenant((tx) =>
        createCustomerLink(tx, { tenantId: ctx.tenantId, accountRef: input.accountId, ttlMs }),
      );
      const base = ctx.web?.selfOrigin ?? 'http://localhost';
      return { url: `${base}/customer/start#${link.token}`, expiresAt: link.expiresAt.toISOString() };
    }),

  /** The browser trades the link's token, once, for an httpOnly session cookie scoped to tenant and account. */
  exchange: publicProcedure
    .input(exchangeCustomerLinkInputSchema)
    .output(customerMeSchema)
    .mutation(async ({ ctx, input }) => {
      const web = requireWeb(ctx.web);
      assertSameOrigin(web);
      const parsed = parseWebToken(input.token);
      if (!parsed)
        throw new IdemError(
          'UNAUTHORIZED',
          'this link is unknown, already used or expired; ask for a new one',
        );
      const { session, branding } = await withTenant(ctx.db, parsed.tenantId, async (tx) => ({
        session: await redeemCustomerLink(tx, parsed),
        branding: await getBranding(tx, parsed.tenantId),
      }));
      ctx.state.tenantId = parsed.tenantId;
      web.setCookie(CUSTOMER_COOKIE, session.token, {
        maxAgeSeconds: (session.expiresAt.getTime() - Date.now()) / 1000,
      });
      return {
        tenantId: parsed.tenantId,
        accountId: session.accountRef,
        csrfToken: csrfTokenFor(session.token),
        expiresAt: session.expiresAt.toISOString(),
        branding,
      };
    }),
});
