import {
  acceptInvitationInputSchema,
  IdemError,
  mfaCodeInputSchema,
  mfaEnrolmentSchema,
  mfaRecoveryCodesSchema,
  mfaVerifiedSchema,
  mfaVerifyInputSchema,
  scrubbedError,
  staffMeSchema,
  staffSignInInputSchema,
} from '@idem/contracts';
import {
  acceptInvitation,
  acceptMfaStep,
  authenticateStaffSession,
  confirmMfaEnrolment,
  findStaffForSignIn,
  NO_PASSWORD_YET,
  openWebSession,
  parseWebToken,
  recordAudit,
  revokeWebSession,
  STAFF_SESSION_MS,
  spendRecoveryCode,
  staffActor,
  staffTenantsForEmail,
  startMfaEnrolment,
  tenantForSlug,
  withTenant,
} from '@idem/core';
import type { z } from 'zod';
import { reserveAndOpen } from '../auth/mfa-check.ts';
import { hashPassword, verifyPassword } from '../auth/password.ts';
import { mfaStatusOf, staffSessionProcedure } from '../auth/procedures.ts';
import { signInSucceeded, takeSignInAttempt } from '../auth/sign-in-throttle.ts';
import { checkTotp, enrolmentOf, newRecoveryCodes, newTotpSecret, recoveryCodeHash } from '../auth/totp.ts';
import { requireMfaKeys, sealSecret } from '../auth/totp-secrets.ts';
import { assertSameOrigin, csrfTokenFor, requireWeb, STAFF_COOKIE } from '../auth/web-request.ts';
import { asIdemError } from '../errors.ts';
import { type Context, publicProcedure, router } from '../trpc.ts';

type StaffSignInInput = z.infer<typeof staffSignInInputSchema>;

/** One argon2id run takes tens of milliseconds; a second is ample for the cap to have room. */
const PASSWORD_CHECK_BUSY_RETRY_MS = 1_000;

const wrongCredentials = () => new IdemError('UNAUTHORIZED', 'wrong organisation, e-mail or password');

/**
 * The throttle's tenant for a sign-in that names no known organisation: its (tenant, e-mail) budget
 * is still counted, under this id no tenant has, and the per-address budget as always.
 */
const NO_ORGANISATION = '00000000-0000-0000-0000-000000000000';

/**
 * The tenant a sign-in is for: the tenant id, the organisation slug, or, with neither, the one
 * tenant the e-mail is staff of. Several: ORGANISATION_REQUIRED, which names none of them. None
 * (unknown slug or e-mail): NO_ORGANISATION, answered later exactly like a wrong password.
 */
async function tenantOfSignIn(ctx: Context, input: StaffSignInInput): Promise<string> {
  if (input.tenantId) return input.tenantId;
  if (input.organisation) return (await tenantForSlug(ctx.db, input.organisation)) ?? NO_ORGANISATION;
  const found = await staffTenantsForEmail(ctx.db, input.email);
  if (found.length > 1)
    throw new IdemError(
      'ORGANISATION_REQUIRED',
      'this e-mail belongs to more than one organisation: enter yours',
    );
  return found[0] ?? NO_ORGANISATION;
}

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
  let tenantId: string;
  try {
    tenantId = await tenantOfSignIn(ctx, input);
  } catch (error) {
    try {
      // An ambiguous e-mail still spends an attempt of the address's budget: asking is not free.
      const attempt = { tenantId: NO_ORGANISATION, email: input.email, clientAddress: ctx.clientAddress };
      const waitMs = await takeSignInAttempt(ctx.db, attempt);
      if (waitMs > 0)
        throw new IdemError('RATE_LIMITED', 'too many failed sign-ins; wait and try again', {
          retryAfterMs: waitMs,
        });
    } finally {
      release();
    }
    throw error;
  }
  const attempt = { tenantId, email: input.email, clientAddress: ctx.clientAddress };
  try {
    const waitMs = await takeSignInAttempt(ctx.db, attempt);
    if (waitMs > 0)
      throw new IdemError('RATE_LIMITED', 'too many failed sign-ins; wait and try again', {
        retryAfterMs: waitMs,
      });
    const found =
      tenantId === NO_ORGANISATION
        ? null
        : await withTenant(ctx.db, tenantId, (tx) => findStaffForSignIn(tx, tenantId, input.email));
    // An invited member without a password yet is checked against the decoy, like an unknown e-mail.
    const stored = found && found.passwordHash !== NO_PASSWORD_YET ? found.passwordHash : null;
    const ok = (await verifyPassword(stored, input.password)) && stored !== null;
    // A failure stays counted (the attempt was taken above); a success clears it.
    if (!found || !ok) throw wrongCredentials();
    user = found;
  } finally {
    release();
  }
  await signInSucceeded(ctx.db, attempt);
  const session = await withTenant(ctx.db, tenantId, async (tx) => {
    const opened = await openWebSession(tx, {
      tenantId,
      subject: { kind: 'staff', userId: user.userId },
      ttlMs: STAFF_SESSION_MS,
    });
    await recordAudit(tx, {
      tenantId,
      actor: staffActor(user.userId),
      action: 'staffAuth.signIn',
      outcome: 'ok',
      sourceAddress: ctx.clientAddress,
      requestId: ctx.requestId,
      details: { email: user.email },
    });
    return opened;
  });
  ctx.state.tenantId = tenantId;
  web.setCookie(STAFF_COOKIE, session.token, { maxAgeSeconds: STAFF_SESSION_MS / 1000 });
  // A fresh session has verified no code yet: the session check tells the screen what comes next.
  const staff = await withTenant(ctx.db, tenantId, (tx) =>
    authenticateStaffSession(tx, { tenantId, tokenHash: parseWebToken(session.token)?.tokenHash ?? '' }),
  );
  return {
    userId: user.userId,
    tenantId: user.tenantId,
    email: user.email,
    role: user.role,
    csrfToken: csrfTokenFor(session.token),
    expiresAt: session.expiresAt.toISOString(),
    mfa: mfaStatusOf(staff),
  };
}

/**
 * A refused sign-in is audited under the tenant it named, as `anonymous` with the e-mail tried.
 * A tenant that does not exist has no log to write to (its foreign key refuses): nothing is kept.
 */
async function auditFailedSignIn(ctx: Context, input: StaffSignInInput, code: string): Promise<void> {
  try {
    // Only under a tenant the caller named; a sign-in without one has no tenant's log to write to.
    const tenantId =
      input.tenantId ?? (input.organisation ? await tenantForSlug(ctx.db, input.organisation) : null);
    if (!tenantId) return;
    await withTenant(ctx.db, tenantId, (tx) =>
      recordAudit(tx, {
        tenantId,
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

  me: staffSessionProcedure.output(staffMeSchema).query(({ ctx }) => ({
    userId: ctx.staff.userId,
    tenantId: ctx.tenantId,
    email: ctx.staff.email,
    role: ctx.staff.role,
    csrfToken: ctx.csrfToken,
    expiresAt: ctx.staff.expiresAt.toISOString(),
    mfa: mfaStatusOf(ctx.staff),
  })),

  signOut: staffSessionProcedure.mutation(async ({ ctx }) => {
    const parsed = parseWebToken(ctx.web.cookies[STAFF_COOKIE] ?? '');
    if (parsed) await ctx.inTenant((tx) => revokeWebSession(tx, parsed));
    ctx.web.setCookie(STAFF_COOKIE, '', { maxAgeSeconds: 0 });
    return { signedOut: true };
  }),

  /**
   * TOTP enrolment, step one: a new secret, kept pending, shown once with its otpauth URL and QR
   * code. Refused (IDEMPOTENCY_CONFLICT) once enrolled: the secret is never shown again.
   */
  mfaEnrolStart: staffSessionProcedure.output(mfaEnrolmentSchema).mutation(async ({ ctx }) => {
    const secret = newTotpSecret();
    // Stored sealed (auth/totp-secrets.ts); shown in clear this once, for the authenticator.
    const sealed = sealSecret(
      requireMfaKeys(ctx.mfaKeys),
      { tenantId: ctx.tenantId, userId: ctx.staff.userId },
      secret,
    );
    await ctx.inTenant((tx) =>
      startMfaEnrolment(tx, { tenantId: ctx.tenantId, userId: ctx.staff.userId, secret: sealed }),
    );
    return enrolmentOf(secret, ctx.staff.email);
  }),

  /**
   * Step two: a code from the authenticator confirms the pending secret. Answers the ten recovery
   * codes, once (only their hashes are kept); the session counts as verified.
   */
  mfaEnrolConfirm: staffSessionProcedure
    .input(mfaCodeInputSchema)
    .output(mfaRecoveryCodesSchema)
    .mutation(async ({ ctx, input }) => {
      const { tenantId, staff } = ctx;
      // The slot is taken (and committed) before the code is checked: see reserveMfaAttempt.
      const record = await reserveAndOpen(
        ctx.db,
        requireMfaKeys(ctx.mfaKeys),
        { tenantId, userId: staff.userId, sessionHash: staff.sessionHash },
        ctx.log,
      );
      const step = record.pendingSecret ? await checkTotp(record.pendingSecret, input.code, null) : null;
      if (!record.storedPending || step === null) throw wrongCode();
      const storedPending = record.storedPending;
      const recoveryCodes = newRecoveryCodes();
      await ctx.inTenant((tx) =>
        confirmMfaEnrolment(tx, {
          tenantId,
          userId: staff.userId,
          secret: storedPending,
          step,
          recoveryHashes: recoveryCodes.map(recoveryCodeHash),
          sessionHash: staff.sessionHash,
        }),
      );
      return { recoveryCodes };
    }),

  /**
   * A code from the authenticator (or a recovery code, once each): completes sign-in, and is the
   * step-up before approving, resolving, cancelling and configuration. A code is accepted once
   * (its time step must be after the last accepted). Each code takes a slot of the member's budget
   * and of the session's before it is checked (five per 15 minutes each; a right code resets the
   * member's and its own session's), so even codes sent at once are checked at most five times;
   * beyond, RATE_LIMITED unchecked. Each refusal is audited.
   */
  mfaVerify: staffSessionProcedure
    .input(mfaVerifyInputSchema)
    .output(mfaVerifiedSchema)
    .mutation(async ({ ctx, input }) => {
      const { tenantId, staff } = ctx;
      const base = { tenantId, userId: staff.userId, sessionHash: staff.sessionHash };
      // The slot is taken (and committed) before the code is checked: see reserveMfaAttempt.
      const record = await reserveAndOpen(ctx.db, requireMfaKeys(ctx.mfaKeys), base, ctx.log);
      let verifiedAt: Date | null = null;
      if (record.secret && 'code' in input) {
        const step = await checkTotp(record.secret, input.code, record.lastStep);
        if (step !== null) verifiedAt = await ctx.inTenant((tx) => acceptMfaStep(tx, { ...base, step }));
      } else if (record.secret && 'recoveryCode' in input) {
        const codeHash = recoveryCodeHash(input.recoveryCode);
        verifiedAt = await ctx.inTenant((tx) => spendRecoveryCode(tx, { ...base, codeHash }));
      }
      if (!verifiedAt) throw wrongCode();
      return { freshUntil: new Date(verifiedAt.getTime() + staff.mfaFreshSeconds * 1000).toISOString() };
    }),

  /**
   * The invited person's first sign-in (I14-TEAM): the link's token, used once before it expires,
   * and the password they choose. Opens their session (which then asks for TOTP enrolment when
   * their role requires it).
   */
  acceptInvitation: publicProcedure
    .input(acceptInvitationInputSchema)
    .output(staffMeSchema)
    .mutation(async ({ ctx, input }) => {
      const web = requireWeb(ctx.web);
      assertSameOrigin(web);
      const parsed = parseWebToken(input.token);
      if (!parsed) throw new IdemError('UNAUTHORIZED', 'this invitation is unknown, already used or expired');
      // Hashing is argon2id work like a sign-in's check: the same per-process cap bounds it.
      const release = ctx.passwordChecks.tryAcquire();
      if (!release) {
        throw new IdemError('RATE_LIMITED', 'too many passwords are being checked; try again shortly', {
          retryAfterMs: PASSWORD_CHECK_BUSY_RETRY_MS,
        });
      }
      const passwordHash = await hashPassword(input.password).finally(release);
      const accepted = await withTenant(ctx.db, parsed.tenantId, async (tx) => {
        const result = await acceptInvitation(tx, parsed, passwordHash);
        await recordAudit(tx, {
          tenantId: parsed.tenantId,
          actor: staffActor(result.user.userId),
          action: 'staffAuth.acceptInvitation',
          outcome: 'ok',
          sourceAddress: ctx.clientAddress,
          requestId: ctx.requestId,
          details: { email: result.user.email },
        });
        return result;
      });
      ctx.state.tenantId = parsed.tenantId;
      web.setCookie(STAFF_COOKIE, accepted.token, { maxAgeSeconds: STAFF_SESSION_MS / 1000 });
      const session = parseWebToken(accepted.token);
      const staff = await withTenant(ctx.db, parsed.tenantId, (tx) =>
        authenticateStaffSession(tx, { tenantId: parsed.tenantId, tokenHash: session?.tokenHash ?? '' }),
      );
      return {
        userId: accepted.user.userId,
        tenantId: parsed.tenantId,
        email: accepted.user.email,
        role: accepted.user.role,
        csrfToken: csrfTokenFor(accepted.token),
        expiresAt: accepted.expiresAt.toISOString(),
        mfa: mfaStatusOf(staff),
      };
    }),
});

const wrongCode = () =>
  new IdemError('UNAUTHORIZED', 'that code is not valid (wrong, expired or already used)');
