import { IdemError } from '@idem/contracts';
import {
  authenticateCustomerSession,
  authenticateStaffSession,
  type Permission,
  parseWebToken,
  recordAudit,
  roleAllows,
  staffActor,
  type Tx,
  withTenant,
} from '@idem/core';
import { asIdemError } from '../errors.ts';
import { publicProcedure } from '../trpc.ts';
import { assertCsrf, CUSTOMER_COOKIE, csrfTokenFor, requireWeb, STAFF_COOKIE } from './web-request.ts';

const signedOut = () => new IdemError('UNAUTHORIZED', 'not signed in, or the session has ended');

/**
 * A signed-in staff member: the session cookie names its tenant, the session is checked inside that
 * tenant's scope, and every mutation must carry the session's CSRF token from our own origin.
 */
export const staffProcedure = publicProcedure.use(async ({ ctx, type, path, getRawInput, next }) => {
  const web = requireWeb(ctx.web);
  const token = web.cookies[STAFF_COOKIE];
  const parsed = token ? parseWebToken(token) : null;
  if (!token || !parsed) throw signedOut();
  const staff = await withTenant(ctx.db, parsed.tenantId, (tx) => authenticateStaffSession(tx, parsed));
  ctx.state.tenantId = staff.tenantId;
  if (type === 'mutation') assertCsrf(web, token);
  const db = ctx.db;
  const actor = staffActor(staff.userId);
  // Every staff mutation is audited (issue 14). A success is recorded in the transaction of its
  // first change, so it commits with it or not at all; a refusal is recorded on its own after.
  const audit = type === 'mutation' ? { recorded: false } : null;
  const entry = async (outcome: string) => ({
    tenantId: staff.tenantId,
    actor,
    action: path,
    outcome,
    sourceAddress: ctx.clientAddress,
    requestId: ctx.requestId,
    details: await getRawInput().catch(() => null),
  });
  const result = await next({
    ctx: {
      web,
      staff,
      tenantId: staff.tenantId,
      actor,
      csrfToken: csrfTokenFor(token),
      inTenant: <T>(work: (tx: Tx) => Promise<T>) =>
        withTenant(db, staff.tenantId, async (tx) => {
          const answer = await work(tx);
          if (audit && !audit.recorded) {
            await recordAudit(tx, await entry('ok'));
            audit.recorded = true;
          }
          return answer;
        }),
    },
  });
  if (audit && (!result.ok || !audit.recorded)) {
    const outcome = result.ok ? 'ok' : asIdemError(result.error).code;
    await withTenant(db, staff.tenantId, async (tx) => recordAudit(tx, await entry(outcome)));
  }
  return result;
});

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
