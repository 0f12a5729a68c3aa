import { IdemError, scrubbedError, staffMeSchema, staffSignInInputSchema } from '@idem/contracts';
import {
  findStaffForSignIn,
  openWebSession,
  parseWebToken,
  recordAudit,
  revokeWebSession,
  STAFF_SESSION_MS,
  staffActor,
  withTenant,
} from '@idem/core';
import type { z } from 'zod';
import { verifyPassword } from '../auth/password.ts';
import { staffProcedure } from '../auth/procedures.ts';
import { signInSucceeded, takeSignInAttempt } from '../auth/sign-in-throttle.ts';
import { assertSameOrigin, csrfTokenFor, requireWeb, STAFF_COOKIE } from '../auth/web-request.ts';
import { asIdemError } from '../errors.ts';
import { type Context, publicProcedure, router } from '../trpc.ts';

type StaffSignInInput = z.infer<typeof staffSignInInputSchema>;

/** One argon2id run takes tens of milliseconds; a second is ample for the cap to have room. */
const PASSWORD_CHECK_BUSY_RETRY_MS = 1_000;

const wrongCredentials = () => new IdemError('UNAUTHORIZED', 'wrong organisation, e-mail or password');

/** Password sign-in; see `signIn` in the router for the rules. */
async function signIn(ctx: Context, input: StaffSignInInput) {
  const web = requireWeb(ctx.web);
  assertSameOrigin(web);
  // The cap first: refusing costs nothing, not even a database round trip.
  const release = ctx.passwordChecks.tryAcquire();
  if (!release) {
    throw new IdemError('RATE_LIMITED', 'too many sign-ins are being checked; try again shortly', {
      retryAfterMs: PASSWORD_CHECK_BUSY_RETRY_MS,
    });
  }
  let user: NonNullable<Awaited<ReturnType<typeof findStaffForSignIn>>>;
  const attempt = { tenantId: input.tenantId, email: input.email, clientAddress: ctx.clientAddress };
  try {
    const waitMs = await takeSignInAttempt(ctx.db, attempt);
    if (waitMs > 0)
      throw new IdemError('RATE_LIMITED', 'too many failed sign-ins; wait and try again', {
        retryAfterMs: waitMs,
      });
    const found = await withTenant(ctx.db, input.tenantId, (tx) =>
      findStaffForSignIn(tx, input.tenantId, input.email),
    );
    const ok = await verifyPassword(found?.passwordHash ?? null, input.password);
    // A failure stays counted (the attempt was taken above); a success clears it.
    if (!found || !ok) throw wrongCredentials();
    user = found;
  } finally {
    release();
  }
  await signInSucceeded(ctx.db, attempt);
  const session = await withTenant(ctx.db, input.tenantId, async (tx) => {
    const opened = await openWebSession(tx, {
      tenantId: input.tenantId,
      subject: { kind: 'staff', userId: user.userId },
      ttlMs: STAFF_SESSION_MS,
    });
    await recordAudit(tx, {
      tenantId: input.tenantId,
      actor: staffActor(user.userId),
      action: 'staffAuth.signIn',
      outcome: 'ok',
      sourceAddress: ctx.clientAddress,
      requestId: ctx.requestId,
      details: { email: user.email },
    });
    return opened;
  });
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
}

/**
 * A refused sign-in is audited under the tenant it named, as `anonymous` with the e-mail tried.
 * A tenant that does not exist has no log to write to (its foreign key refuses): nothing is kept.
 */
async function auditFailedSignIn(ctx: Context, input: StaffSignInInput, code: string): Promise<void> {
  try {
    await withTenant(ctx.db, input.tenantId, (tx) =>
      recordAudit(tx, {
        tenantId: input.tenantId,
        actor: 'anonymous',
        action: 'staffAuth.signIn',
        outcome: code,
        sourceAddress: ctx.clientAddress,
        requestId: ctx.requestId,
        details: { email: input.email },
      }),
    );
  } catch (error) {
    ctx.log.warn({ message: scrubbedError(error, 200) }, 'failed sign-in not audited');
  }
}

export const staffAuthRouter = router({
  /**
   * Password sign-in to a session stored in PostgreSQL. Unknown e-mail and wrong password answer
   * alike, after the same argon2id work. Attempts are counted in PostgreSQL per (tenant, e-mail) and per
   * client address before the password is checked, and password checks running at once are capped
   * (auth/sign-in-throttle.ts): beyond either, RATE_LIMITED with retryAfterMs.
   */
  signIn: publicProcedure
    .input(staffSignInInputSchema)
    .output(staffMeSchema)
    .mutation(async ({ ctx, input }) => {
      try {
        return await signIn(ctx, input);
      } catch (error) {
        await auditFailedSignIn(ctx, input, asIdemError(error).code);
        throw error;
      }
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
