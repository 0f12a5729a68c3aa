import { IdemError, type StaffRole } from '@idem/contracts';
import { and, asc, eq, gt, isNull, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { staffInvitations, staffUsers, webSessions } from '../db/schema/index.ts';
import { enqueueInvitationMail } from './invitation-mail.ts';
import { hashToken, mintToken, openWebSession, type ParsedToken, STAFF_SESSION_MS } from './sessions.ts';
import { createStaffUser, type StaffUser } from './users.ts';

/**
 * The Team screen's operations (I14-TEAM): list, invite, change role, disable. An invited
 * member exists at once, with an empty password hash that no password verifies, until the one-time
 * link sets a password. Two guards keep a team administrable: an admin cannot disable themselves,
 * and no change may leave the tenant without an active admin (checked under a lock on the admins).
 *
 * The invitation link goes to the invitee's address only (a mail work item written in the same
 * transaction, sent by the mail sender): the admin who invites never sees it, so they cannot accept
 * it themselves. A member who accepts, or whose role changes, approves only after the tenant's
 * cooling-off period (the database sets `approvals_from`, ../approvals/cooling-off.ts refuses).
 */

export const INVITATION_MS = 72 * 60 * 60_000;

/** The stored password hash of a member who has not used their invitation yet: verifies nothing. */
export const NO_PASSWORD_YET = '';

export interface TeamMemberRow {
  userId: string;
  email: string;
  role: StaffRole;
  status: 'active' | 'invited' | 'disabled';
  mfaEnrolled: boolean;
  createdAt: Date;
  /** While the member is cooling off: when their approvals start to count. Null: they count now. */
  approvalsFrom: Date | null;
}

export async function listTeam(tx: Tx, tenantId: string): Promise<TeamMemberRow[]> {
  const rows = await tx
    .select({
      userId: staffUsers.userId,
      email: staffUsers.email,
      role: staffUsers.role,
      disabledAt: staffUsers.disabledAt,
      passwordHash: staffUsers.passwordHash,
      mfaEnrolledAt: staffUsers.mfaEnrolledAt,
      createdAt: staffUsers.createdAt,
      // Compared on the database's clock, the one the approval check uses.
      approvalsFrom:
        sql<Date | null>`case when ${staffUsers.approvalsFrom} > now() then ${staffUsers.approvalsFrom} end`.mapWith(
          staffUsers.approvalsFrom,
        ),
    })
    .from(staffUsers)
    .where(eq(staffUsers.tenantId, tenantId))
    .orderBy(asc(staffUsers.email))
    .limit(1000);
  return rows.map((row) => ({
    userId: row.userId,
    email: row.email,
    role: row.role as StaffRole,
    status: row.disabledAt ? 'disabled' : row.passwordHash === NO_PASSWORD_YET ? 'invited' : 'active',
    mfaEnrolled: row.mfaEnrolledAt !== null,
    createdAt: row.createdAt,
    approvalsFrom: row.approvalsFrom,
  }));
}

export interface StaffInvitationInput {
  tenantId: string;
  email: string;
  role: StaffRole;
  /** Who invites ('staff:<user id>'), kept with the invitation. */
  createdBy: string;
  /** The origin the link points at (`https://pay.example.com`): the deployment's, never a request's. */
  linkOrigin: string;
}

/**
 * Creates the member, a one-time invitation and the e-mail that carries its link, in the caller's
 * transaction. The token leaves only in that e-mail: the answer names the member and the expiry.
 */
export async function inviteStaff(
  tx: Tx,
  input: StaffInvitationInput,
): Promise<{ user: StaffUser; expiresAt: Date }> {
  const user = await createStaffUser(tx, {
    tenantId: input.tenantId,
    email: input.email,
    role: input.role,
    passwordHash: NO_PASSWORD_YET,
  });
  const token = mintToken(input.tenantId);
  const expiresAt = new Date(Date.now() + INVITATION_MS);
  await tx.insert(staffInvitations).values({
    tenantId: input.tenantId,
    invitationHash: hashToken(token),
    userId: user.userId,
    createdBy: input.createdBy,
    expiresAt,
  });
  await enqueueInvitationMail(tx, {
    tenantId: input.tenantId,
    userId: user.userId,
    to: user.email,
    role: input.role,
    link: `${new URL(input.linkOrigin).origin}/staff/invite#${token}`,
    expiresAt,
  });
  return { user, expiresAt };
}

/**
 * Uses an invitation once (conditional UPDATE on used_at, before it expires), sets the member's
 * first password and opens their session. A member who has a password already, or was disabled
 * meanwhile, gets nothing. Setting the first password starts the cooling-off period (a trigger).
 */
export async function acceptInvitation(
  tx: Tx,
  parsed: ParsedToken,
  passwordHash: string,
): Promise<{ user: StaffUser; token: string; expiresAt: Date }> {
  const refused = () =>
    new IdemError('UNAUTHORIZED', 'this invitation is unknown, already used or expired; ask for a new one');
  const [used] = await tx
    .update(staffInvitations)
    .set({ usedAt: sql`now()` })
    .where(
      and(
        eq(staffInvitations.tenantId, parsed.tenantId),
        eq(staffInvitations.invitationHash, parsed.tokenHash),
        isNull(staffInvitations.usedAt),
        gt(staffInvitations.expiresAt, sql`now()`),
      ),
    )
    .returning({ userId: staffInvitations.userId });
  if (!used) throw refused();
  const [user] = await tx
    .update(staffUsers)
    .set({ passwordHash })
    .where(
      and(
        eq(staffUsers.tenantId, parsed.tenantId),
        eq(staffUsers.userId, used.userId),
        eq(staffUsers.passwordHash, NO_PASSWORD_YET),
        isNull(staffUsers.disabledAt),
      ),
    )
    .returning({ userId: staffUsers.userId, email: staffUsers.email, role: staffUsers.role });
  if (!user) throw refused();
  const session = await openWebSession(tx, {
    tenantId: parsed.tenantId,
    subject: { kind: 'staff', userId: user.userId },
    ttlMs: STAFF_SESSION_MS,
  });
  return {
    user: { tenantId: parsed.tenantId, userId: user.userId, email: user.email, role: user.role as StaffRole },
    ...session,
  };
}

/**
 * The active admins, locked: every change that could remove one takes this lock first, so two
 * admins demoting each other at once cannot both succeed.
 */
async function lockActiveAdmins(tx: Tx, tenantId: string): Promise<string[]> {
  const rows = await tx
    .select({ userId: staffUsers.userId })
    .from(staffUsers)
    .where(
      and(eq(staffUsers.tenantId, tenantId), eq(staffUsers.role, 'admin'), isNull(staffUsers.disabledAt)),
    )
    .for('update');
  return rows.map((row) => row.userId);
}

async function memberOf(tx: Tx, tenantId: string, userId: string) {
  const [row] = await tx
    .select({ role: staffUsers.role, disabledAt: staffUsers.disabledAt })
    .from(staffUsers)
    .where(and(eq(staffUsers.tenantId, tenantId), eq(staffUsers.userId, userId)))
    .for('update');
  if (!row) throw new IdemError('NOT_FOUND', 'no such staff member');
  return row;
}

export async function setStaffRole(
  tx: Tx,
  input: { tenantId: string; userId: string; role: StaffRole },
): Promise<void> {
  const admins = await lockActiveAdmins(tx, input.tenantId);
  const member = await memberOf(tx, input.tenantId, input.userId);
  if (member.disabledAt) throw new IdemError('INVALID_TRANSITION', 'this staff member is disabled');
  if (input.role !== 'admin' && admins.length === 1 && admins[0] === input.userId)
    throw new IdemError('FORBIDDEN', 'the last admin cannot be demoted: make another admin first');
  await tx
    .update(staffUsers)
    .set({ role: input.role })
    .where(and(eq(staffUsers.tenantId, input.tenantId), eq(staffUsers.userId, input.userId)));
}

/** Disables a member and ends their sessions at once (the session check also refuses a disabled member). */
export async function disableStaff(
  tx: Tx,
  input: { tenantId: string; userId: string; actorUserId: string },
): Promise<void> {
  if (input.userId === input.actorUserId)
    throw new IdemError('FORBIDDEN', 'an admin cannot disable themselves: ask another admin');
  const admins = await lockActiveAdmins(tx, input.tenantId);
  const member = await memberOf(tx, input.tenantId, input.userId);
  if (member.disabledAt) return;
  if (admins.length === 1 && admins[0] === input.userId)
    throw new IdemError('FORBIDDEN', 'the last admin cannot be disabled');
  await tx
    .update(staffUsers)
    .set({ disabledAt: sql`now()` })
    .where(and(eq(staffUsers.tenantId, input.tenantId), eq(staffUsers.userId, input.userId)));
  await tx
    .update(webSessions)
    .set({ revokedAt: sql`now()` })
    .where(
      and(
        eq(webSessions.tenantId, input.tenantId),
        eq(webSessions.userId, input.userId),
        isNull(webSessions.revokedAt),
      ),
    );
}
