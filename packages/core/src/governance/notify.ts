import { randomUUID } from 'node:crypto';
import type { StaffNotificationView } from '@idem/contracts';
import { and, desc, eq, isNull } from 'drizzle-orm';
import type { Executor, Tx } from '../db/connect.ts';
import { staffNotifications, staffUsers, workItems } from '../db/schema/index.ts';
import { NO_PASSWORD_YET } from '../staff/team.ts';
import { staffActor } from '../staff/users.ts';
import { CONTROL_NOTICE_MAIL_TOPIC, type ControlNoticeMailPayload } from './notice-mail.ts';

/**
 * Tells every active admin about a control change (one row each, in the caller's transaction, so
 * a change is never made without its notice). The staff Overview shows the rows; each admin who
 * has joined (a password set) is also e-mailed, through the mail outbox: one work item per notice,
 * keyed by the notice's id, so a notice has exactly one e-mail on the way (notice-mail.ts).
 */
export async function notifyAdmins(
  tx: Tx,
  tenantId: string,
  notice: { topic: string; proposalId: string | null; message: string },
): Promise<number> {
  const admins = await tx
    .select({ userId: staffUsers.userId, passwordHash: staffUsers.passwordHash })
    .from(staffUsers)
    .where(
      and(eq(staffUsers.tenantId, tenantId), eq(staffUsers.role, 'admin'), isNull(staffUsers.disabledAt)),
    );
  if (admins.length === 0) return 0;
  const rows = admins.map((admin) => ({
    tenantId,
    notificationId: randomUUID(),
    recipient: staffActor(admin.userId),
    topic: notice.topic,
    proposalId: notice.proposalId,
    message: notice.message.slice(0, 500),
  }));
  await tx.insert(staffNotifications).values(rows);
  // Ids only in the outbox: the sender reads the address and the notice when it sends, so an
  // admin disabled meanwhile is not mailed and no address is stored twice.
  const mails = admins.flatMap((admin, index) => {
    const row = rows[index];
    if (!row || admin.passwordHash === NO_PASSWORD_YET) return [];
    const payload: ControlNoticeMailPayload = { notificationId: row.notificationId, userId: admin.userId };
    return [{ tenantId, workId: row.notificationId, topic: CONTROL_NOTICE_MAIL_TOPIC, payload }];
  });
  if (mails.length > 0) await tx.insert(workItems).values(mails).onConflictDoNothing();
  return admins.length;
}

/** One member's notices, newest first (at most `limit`, 1..200). */
export async function listNotifications(
  db: Executor,
  tenantId: string,
  recipient: string,
  limit = 50,
): Promise<StaffNotificationView[]> {
  const rows = await db
    .select()
    .from(staffNotifications)
    .where(and(eq(staffNotifications.tenantId, tenantId), eq(staffNotifications.recipient, recipient)))
    .orderBy(desc(staffNotifications.createdAt))
    .limit(Math.min(Math.max(1, Math.trunc(limit)), 200));
  return rows.map((row) => ({
    notificationId: row.notificationId,
    topic: row.topic,
    proposalId: row.proposalId,
    message: row.message,
    createdAt: row.createdAt.toISOString(),
  }));
}
