import type { StaffMfaStatus } from '@idem/contracts';
import { IdemError, type Permission, roleAllows } from '@idem/contracts';
import {
  authenticateCustomerSession,
  authenticateStaffSession,
  parseWebToken,
  recordAudit,
  runAudited,
  type StaffSessionUser,
  staffActor,
  type Tx,
  withTenant,
} from '@idem/core';
import { asIdemError } from '../errors.ts';
import { publicProcedure } from '../trpc.ts';
import { assertCsrf, CUSTOMER_COOKIE, csrfTokenFor, requireWeb, STAFF_COOKIE } from './web-request.ts';

const signedOut = () => new IdemError('UNAUTHORIZED', 'not signed in, or the session has ended');

/**
 * Where a staff session stands with TOTP. Approvers, operators and admins need it when
 * their tenant requires it; anyone who enrolled uses it whatever the tenant says.
 */
export function mfaStatusOf(staff: StaffSessionUser): StaffMfaStatus {
  const required = staff.mfaEnrolled || (staff.tenantMfaRequired && staff.role !== 'support');
  if (!required) return { state: 'off', freshUntil: null };
  if (!staff.mfaEnrolled) return { state: 'enrol', freshUntil: null };
  if (!staff.mfaAt) return { state: 'verify', freshUntil: null };
  const freshUntil = new Date(staff.mfaAt.getTime() + staff.mfaFreshSeconds * 1000);
  return { state: 'ok', freshUntil: freshUntil.toISOString() };
}

/**
 * A signed-in staff session, before any TOTP check: only the sign-in's own procedures (me, sign-out,
 * enrolment, code verification) use it. The session cookie names its tenant, the session is checked
 * inside that tenant's scope, and every mutation must carry the session's CSRF token from our own
 * origin.
 */
export const staffSessionProcedure = publicProcedure.use(async ({ ctx, type, path, getRawInput, next }) => {
  const web = requireWeb(ctx.web);
  const token = web.cookies[STAFF_COOKIE];
  const parsed = token ? parseWebToken(token) : null;
  if (!token || !parsed) throw signedOut();
  const session = await withTenant(ctx.db, parsed.tenantId, (tx) => authenticateStaffSession(tx, parsed));
  // This server's cap on the step-up window (IDEM_MFA_FRESH_SECONDS_MAX) shortens the tenant's, never lengthens it.
  const staff =
    ctx.mfaFreshSecondsMax === undefined
      ? session
      : { ...session, mfaFreshSeconds: Math.min(session.mfaFreshSeconds, ctx.mfaFreshSecondsMax) };
  ctx.state.tenantId = staff.tenantId;
  if (type === 'mutation') assertCsrf(web, token);
  const db = ctx.db;
  const actor = staffActor(staff.userId);
  // Every staff mutation is audited, once per outcome, where the outcome is decided: a transaction
  // that writes records `ok` with its change (commits with it or not at all); one that refuses
  // records the refusal's code in that same transaction, after its savepoint undid what it wrote
  // (core's runAudited). Reads before the deciding transaction record nothing. A refusal decided
  // outside any transaction (role, TOTP, a missing row after a read) is recorded on its own after.
  const audit = type === 'mutation' ? { ok: false, refused: false } : null;
  const entry = async (outcome: string) => ({
    tenantId: staff.tenantId,
    actor,
    action: path,
    outcome,
    sourceAddress: ctx.clientAddress,
    requestId: ctx.requestId,
    details: await getRawInput().catch(() => null),
  });
  const inTenant = async <T>(
    work: (tx: Tx) => Promise<T>,
    options: { refusalOf?: (value: T) => IdemError | null } = {},
  ): Promise<T> => {
    if (!audit) return withTenant(db, staff.tenantId, work);
    // After a recorded `ok`, a later transaction's success adds nothing; its refusal is recorded.
    const okWhen = audit.ok ? 'never' : 'wrote';
    const result = await runAudited(db, staff.tenantId, { entry, okWhen, ...options }, work);
    if (result.outcome === 'refused') {
      audit.refused = true;
      throw result.error;
    }
    if (result.recorded) audit.ok = true;
    return result.value;
  };
  const result = await next({
    ctx: { web, staff, tenantId: staff.tenantId, actor, csrfToken: csrfTokenFor(token), inTenant },
  });
  if (audit && (result.ok ? !audit.ok : !audit.refused)) {
    const outcome = result.ok ? 'ok' : asIdemError(result.error).code;
    await withTenant(db, staff.tenantId, async (tx) => recordAudit(tx, await entry(outcome)));
  }
  return result;
});

/**
 * A signed-in staff member who has passed TOTP where it is needed: a session still to enrol or to
 * verify its code is refused everything else with MFA_REQUIRED (and the refusal is audited).
 */
export const staffProcedure = staffSessionProcedure.use(({ ctx, next }) => {
  const mfa = mfaStatusOf(ctx.staff);
  if (mfa.state === 'enrol')
    throw new IdemError('MFA_REQUIRED', 'set up an authenticator first (your role requires it)');
  if (mfa.state === 'verify')
    throw new IdemError('MFA_REQUIRED', 'enter the code from your authenticator first');
  return next({ ctx: { mfa } });
});

/**
 * Step-up: approving, resolving, cancelling or stopping, and changing configuration need
 * a code verified within the tenant's window (5 minutes by default) when the member uses TOTP;
 * otherwise STEP_UP_REQUIRED, and the screen asks for a code and retries. A member who does not
 * use TOTP (a tenant without the requirement) passes.
 */
export function assertFreshMfa(mfa: StaffMfaStatus, now = Date.now()): void {
  if (mfa.state === 'ok' && mfa.freshUntil && Date.parse(mfa.freshUntil) <= now) {
    throw new IdemError('STEP_UP_REQUIRED', 'enter a fresh code from your authenticator to do this');
  }
}

/** A staff procedure that needs a fresh code (step-up, see assertFreshMfa) and no particular role. */
export const freshStaffProcedure = staffProcedure.use(({ ctx, next }) => {
  assertFreshMfa(ctx.mfa);
  return next();
});

/**
 * A staff procedure that needs one of the permissions and a fresh code (step-up): approving,
 * resolving, cancelling or stopping, and configuration (branding, team, and any keys, endpoints
 * or risk rules screens).
 */
export function staffWithFresh(...permissions: [Permission, ...Permission[]]) {
  return staffWithAny(...permissions).use(({ ctx, next }) => {
    assertFreshMfa(ctx.mfa);
    return next();
  });
}

/** A staff procedure that also needs a permission; refused with FORBIDDEN by the server, not hidden. */
export function staffWith(permission: Permission) {
  return staffProcedure.use(({ ctx, next }) => {
    if (!roleAllows(ctx.staff.role, permission)) {
      throw new IdemError('FORBIDDEN', `the ${ctx.staff.role} role may not do this (needs ${permission})`);
    }
    return next();
  });
}

/** A staff procedure any one of several permissions allows (e.g. an action that only lowers risk). */
export function staffWithAny(...permissions: Permission[]) {
  return staffProcedure.use(({ ctx, next }) => {
    if (!permissions.some((permission) => roleAllows(ctx.staff.role, permission))) {
      throw new IdemError(
        'FORBIDDEN',
        `the ${ctx.staff.role} role may not do this (needs ${permissions.join(' or ')})`,
      );
    }
    return next();
  });
}

/** A customer of one account, through the session the operator's one-time link opened. */
export const customerProcedure = publicProcedure.use(async ({ ctx, type, next }) => {
  const web = requireWeb(ctx.web);
  const token = web.cookies[CUSTOMER_COOKIE];
  const parsed = token ? parseWebToken(token) : null;
  if (!token || !parsed) throw signedOut();
  const customer = await withTenant(ctx.db, parsed.tenantId, (tx) => authenticateCustomerSession(tx, parsed));
  ctx.state.tenantId = customer.tenantId;
  if (type === 'mutation') assertCsrf(web, token);
  const db = ctx.db;
  return next({
    ctx: {
      web,
      customer,
      tenantId: customer.tenantId,
      accountRef: customer.accountRef,
      actor: `customer:${customer.accountRef}`,
      csrfToken: csrfTokenFor(token),
      inTenant: <T>(work: (tx: Tx) => Promise<T>) => withTenant(db, customer.tenantId, work),
    },
  });
});
