import { createHash, randomBytes } from 'node:crypto';
import { IdemError, type StaffRole } from '@idem/contracts';
import { and, eq, gt, isNull, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { customerSessionLinks, staffUsers, tenants, webSessions } from '../db/schema/index.ts';
import type { StaffUser } from './users.ts';

/**
 * A session or link token is `<tenant id>.<43 base64url chars = 256 random bits>`. The tenant part
 * is not a secret: it lets the lookup run inside that tenant's row-level-security scope (as API keys
 * do). Only the SHA-256 of the whole token is stored.
 */
const TOKEN_PATTERN = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([A-Za-z0-9_-]{43})$/;

export const STAFF_SESSION_MS = 8 * 60 * 60_000;
export const CUSTOMER_SESSION_MS = 30 * 60_000;
export const CUSTOMER_LINK_MS_DEFAULT = 10 * 60_000;
export const CUSTOMER_LINK_MS_MAX = 60 * 60_000;

export interface ParsedToken {
  tenantId: string;
  tokenHash: string;
}

export function parseWebToken(token: string): ParsedToken | null {
  const match = TOKEN_PATTERN.exec(token);
  const tenantId = match?.[1];
  if (!tenantId) return null;
  return { tenantId, tokenHash: hashToken(token) };
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function mintToken(tenantId: string): string {
  return `${tenantId.toLowerCase()}.${randomBytes(32).toString('base64url')}`;
}

export type SessionSubject = { kind: 'staff'; userId: string } | { kind: 'customer'; accountRef: string };

/** Opens a session; the token is returned once, for the cookie. */
export async function openWebSession(
  tx: Tx,
  input: { tenantId: string; subject: SessionSubject; ttlMs: number },
): Promise<{ token: string; expiresAt: Date }> {
  const token = mintToken(input.tenantId);
  const expiresAt = new Date(Date.now() + input.ttlMs);
  await tx.insert(webSessions).values({
    tenantId: input.tenantId,
    sessionHash: hashToken(token),
    kind: input.subject.kind,
    userId: input.subject.kind === 'staff' ? input.subject.userId : null,
    accountRef: input.subject.kind === 'customer' ? input.subject.accountRef : null,
    expiresAt,
  });
  return { token, expiresAt };
}

const noSession = () => new IdemError('UNAUTHORIZED', 'not signed in, or the session has ended');

/**
 * The staff member behind a live session (not revoked, not expired, user not disabled). Every
 * failure is the same UNAUTHORIZED so nothing is learnt about which part was wrong.
 */
export interface StaffSessionUser extends StaffUser {
  expiresAt: Date;
  /** The SHA-256 of the session token: the key of its row, for marking a verified code on it. */
  sessionHash: string;
  /** TOTP: whether the member enrolled, when this session last verified a code. */
  mfaEnrolled: boolean;
  mfaAt: Date | null;
  /** The tenant's settings: TOTP required for approvers, operators and admins; the step-up window. */
  tenantMfaRequired: boolean;
  mfaFreshSeconds: number;
}

export async function authenticateStaffSession(tx: Tx, parsed: ParsedToken): Promise<StaffSessionUser> {
  const rows = await tx
    .select({
      userId: staffUsers.userId,
      email: staffUsers.email,
      role: staffUsers.role,
      expiresAt: webSessions.expiresAt,
      mfaEnrolledAt: staffUsers.mfaEnrolledAt,
      mfaAt: webSessions.mfaAt,
      tenantMfaRequired: tenants.mfaRequired,
      mfaFreshSeconds: tenants.mfaFreshSeconds,
    })
    .from(webSessions)
    .innerJoin(
      staffUsers,
      and(eq(staffUsers.tenantId, webSessions.tenantId), eq(staffUsers.userId, webSessions.userId)),
    )
    .innerJoin(tenants, eq(tenants.tenantId, webSessions.tenantId))
    .where(
      and(
        eq(webSessions.tenantId, parsed.tenantId),
        eq(webSessions.sessionHash, parsed.tokenHash),
        eq(webSessions.kind, 'staff'),
        isNull(webSessions.revokedAt),
        gt(webSessions.expiresAt, sql`now()`),
        isNull(staffUsers.disabledAt),
      ),
    );
  const row = rows[0];
  if (!row) throw noSession();
  const { mfaEnrolledAt, ...rest } = row;
  return {
    tenantId: parsed.tenantId,
    ...rest,
    role: row.role as StaffRole,
    sessionHash: parsed.tokenHash,
    mfaEnrolled: mfaEnrolledAt !== null,
  };
}

/** The one account a live customer session may see. */
export async function authenticateCustomerSession(
  tx: Tx,
  parsed: ParsedToken,
): Promise<{ tenantId: string; accountRef: string; expiresAt: Date }> {
  const rows = await tx
    .select({ accountRef: webSessions.accountRef, expiresAt: webSessions.expiresAt })
    .from(webSessions)
    .where(
      and(
        eq(webSessions.tenantId, parsed.tenantId),
        eq(webSessions.sessionHash, parsed.tokenHash),
        eq(webSessions.kind, 'customer'),
        isNull(webSessions.revokedAt),
        gt(webSessions.expiresAt, sql`now()`),
      ),
    );
  const row = rows[0];
  if (!row?.accountRef) throw noSession();
  return { tenantId: parsed.tenantId, accountRef: row.accountRef, expiresAt: row.expiresAt };
}

export async function revokeWebSession(tx: Tx, parsed: ParsedToken): Promise<void> {
  await tx
    .update(webSessions)
    .set({ revokedAt: sql`now()` })
    .where(
      and(
        eq(webSessions.tenantId, parsed.tenantId),
        eq(webSessions.sessionHash, parsed.tokenHash),
        isNull(webSessions.revokedAt),
      ),
    );
}

/** A one-time link for one account, made on the operator backend's request. */
export async function createCustomerLink(
  tx: Tx,
  input: { tenantId: string; accountRef: string; ttlMs: number },
): Promise<{ token: string; expiresAt: Date }> {
  const ttlMs = Math.min(Math.max(input.ttlMs, 10_000), CUSTOMER_LINK_MS_MAX);
  const token = mintToken(input.tenantId);
  const expiresAt = new Date(Date.now() + ttlMs);
  await tx.insert(customerSessionLinks).values({
    tenantId: input.tenantId,
    linkHash: hashToken(token),
    accountRef: input.accountRef,
    expiresAt,
  });
  return { token, expiresAt };
}

/**
 * Uses a link, once: one conditional UPDATE (unused and unexpired) marks it used, so two racing
 * exchanges of one link open at most one session. Then opens the customer session.
 */
export async function redeemCustomerLink(
  tx: Tx,
  parsed: ParsedToken,
): Promise<{ accountRef: string; token: string; expiresAt: Date }> {
  const used = await tx
    .update(customerSessionLinks)
    .set({ usedAt: sql`now()` })
    .where(
      and(
        eq(customerSessionLinks.tenantId, parsed.tenantId),
        eq(customerSessionLinks.linkHash, parsed.tokenHash),
        isNull(customerSessionLinks.usedAt),
        gt(customerSessionLinks.expiresAt, sql`now()`),
      ),
    )
    .returning({ accountRef: customerSessionLinks.accountRef });
  const accountRef = used[0]?.accountRef;
  if (!accountRef) {
    throw new IdemError('UNAUTHORIZED', 'this link is unknown, already used or expired; ask for a new one');
  }
  const session = await openWebSession(tx, {
    tenantId: parsed.tenantId,
    subject: { kind: 'customer', accountRef },
    ttlMs: CUSTOMER_SESSION_MS,
  });
  return { accountRef, ...session };
}
