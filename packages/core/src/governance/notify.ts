import { randomUUID } from 'node:crypto';
import type { StaffNotificationView } from '@idem/contracts';
import { and, desc, eq, isNull } from 'drizzle-orm';
import type { Executor, Tx } from '../db/connect.ts';
import { staffNotifications, staffUsers } from '../db/schema/index.ts';
import { staffActor } from '../staff/users.ts';

/**
 * Tells every active admin about a control change (one row each, in the caller's transaction, so
 * a change is never made without its notice). The staff Overview shows them; an e-mail sender can
 * read the same rows.
 */
export async function notifyAdmins(
  tx: Tx,
  tenantId: string,
  notice: { topic: string; proposalId: string | null; message: string },
): Promise<number> {
  const admins = await tx
    .select({ userId: staffUsers.userId })
    .from(staffUsers)
    .where(
      and(eq(staffUsers.tenantId, tenantId), eq(staffUsers.role, 'admin'), isNull(staffUsers.disabledAt)),
    );
  if (admins.length === 0) return 0;
  await tx.insert(staffNotifications).values(
    admins.map((admin) => ({
      tenantId,
      notificationId: randomUUID(),
      recipient: staffActor(admin.userId),
      topic: notice.topic,
      proposalId: notice.proposalId,
      message: notice.message.slice(0, 500),
    })),
  );
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
