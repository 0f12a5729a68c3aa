import { IdemError, staffMeSchema, staffSignInInputSchema } from '@idem/contracts';
import {
  findStaffForSignIn,
  openWebSession,
  parseWebToken,
  revokeWebSession,
  STAFF_SESSION_MS,
  withTenant,
} from '@idem/core';
import { verifyPassword } from '../auth/password.ts';
import { staffProcedure } from '../auth/procedures.ts';
import { signInThrottle } from '../auth/sign-in-throttle.ts';
import { assertSameOrigin, csrfTokenFor, requireWeb, STAFF_COOKIE } from '../auth/web-request.ts';
import { publicProcedure, router } from '../trpc.ts';

const wrongCredentials = () => new IdemError('UNAUTHORIZED', 'wrong organisation, e-mail or password');

export const staffAuthRouter = router({
  /**
   * Password sign-in to a session stored in PostgreSQL. Unknown e-mail and wrong password answer
   * alike, after the same argon2id work; repeated failures are throttled.
   */
  signIn: publicProcedure
    .input(staffSignInInputSchema)
    .output(staffMeSchema)
    .mutation(async ({ ctx, input }) => {
      const web = requireWeb(ctx.web);
      assertSameOrigin(web);
      const throttleKey = `${input.tenantId}|${input.email.toLowerCase()}`;
      const waitMs = signInThrottle.blockedMs(throttleKey);
      if (waitMs > 0)
        throw new IdemError('RATE_LIMITED', 'too many failed sign-ins; wait and try again', {
          retryAfterMs: Math.ceil(waitMs),
        });
      const user = await withTenant(ctx.db, input.tenantId, (tx) =>
        findStaffForSignIn(tx, input.tenantId, input.email),
      );
      const ok = await verifyPassword(user?.passwordHash ?? null, input.password);
      if (!user || !ok) {
        signInThrottle.fail(throttleKey);
        throw wrongCredentials();
      }
      signInThrottle.succeed(throttleKey);
      const session = await withTenant(ctx.db, input.tenantId, (tx) =>
        openWebSession(tx, {
          tenantId: input.tenantId,
          subject: { kind: 'staff', userId: user.userId },
          ttlMs: STAFF_SESSION_MS,
        }),
      );
      ctx.state.tenantId = input.tenantId;
      web.setCookie(STAFF_COOKIE, session.token, { maxAgeSeconds: STAFF_SESSION_MS / 1000 });
      return {
        userId: user.userId,
        tenantId: user.tenantId,
        email: user.email,
        role: user.role,
        csrfToken: csrfTokenFor(session.token),
        expiresAt: session.expiresAt.toISOString(),
      };
    }),

  me: staffProcedure.output(staffMeSchema).query(({ ctx }) => ({
    userId: ctx.staff.userId,
    tenantId: ctx.tenantId,
    email: ctx.staff.email,
    role: ctx.staff.role,
    csrfToken: ctx.csrfToken,
    expiresAt: ctx.staff.expiresAt.toISOString(),
  })),

  signOut: staffProcedure.mutation(async ({ ctx }) => {
    const parsed = parseWebToken(ctx.web.cookies[STAFF_COOKIE] ?? '');
    if (parsed) await ctx.inTenant((tx) => revokeWebSession(tx, parsed));
    ctx.web.setCookie(STAFF_COOKIE, '', { maxAgeSeconds: 0 });
    return { signedOut: true };
  }),
});
