import { and, eq, isNull, ne } from 'drizzle-orm';
import { z } from 'zod';
import type { Tx } from '../db/connect.ts';
import { staffNotifications, staffUsers, tenants } from '../db/schema/index.ts';
import type { MailMessage } from '../staff/invitation-mail.ts';
import { NO_PASSWORD_YET } from '../staff/team.ts';
import { staffActor } from '../staff/users.ts';

/**
 * The control-change notice by e-mail, through the transactional outbox: notifyAdmins writes one
 * `mail.control_notice` work item per admin per notice, in the transaction that makes the change,
 * with the notice's id as the work item's id (so there is one item per notice, whoever writes it
 * again). The mail sender (workers' mail step) drains them with retries; each item is completed in
 * the transaction that sends it, and the message carries a Message-ID made from the notice's id,
 * so the one resend a crash between SMTP's acceptance and that commit can cause is recognisable
 * as the same message.
 */

export const CONTROL_NOTICE_MAIL_TOPIC = 'mail.control_notice' as const;

const controlNoticeMailPayloadSchema = z.object({ notificationId: z.uuid(), userId: z.uuid() });
export type ControlNoticeMailPayload = z.infer<typeof controlNoticeMailPayloadSchema>;

/** What happened, in the subject and first line, by the notice's topic. */
const HEADLINES: Record<string, string> = {
  control_change_proposed: 'a control change was proposed and waits for admin approval',
  control_change_approved: 'a control change was approved and waits out its delay',
  control_change_applied: 'a control change is now in force',
  control_change_refused: 'a control change was not applied',
  // An automatic trip froze the tenant or an asset (docs/GOVERNANCE.md "Automatic trips").
  freeze_tripped: 'an automatic trip froze withdrawals',
};

/**
 * The message for one notice e-mail, or null when it is not to be sent any more: the notice is
 * gone, or its admin was disabled, demoted or has no password since (such an item is completed
 * without sending). Holds what the Overview's notices card shows (the notice's words, its time,
 * the proposal) and nothing else: no address but the recipient's own, no secret.
 */
export async function controlNoticeMailOf(
  tx: Tx,
  tenantId: string,
  payload: unknown,
  options: { publicUrl: string | null },
): Promise<MailMessage | null> {
  const parsed = controlNoticeMailPayloadSchema.safeParse(payload);
  if (!parsed.success) return null;
  const { notificationId, userId } = parsed.data;
  const [recipient] = await tx
    .select({ email: staffUsers.email })
    .from(staffUsers)
    .where(
      and(
        eq(staffUsers.tenantId, tenantId),
        eq(staffUsers.userId, userId),
        eq(staffUsers.role, 'admin'),
        isNull(staffUsers.disabledAt),
        ne(staffUsers.passwordHash, NO_PASSWORD_YET),
      ),
    );
  const [notice] = await tx
    .select()
    .from(staffNotifications)
    .where(
      and(
        eq(staffNotifications.tenantId, tenantId),
        eq(staffNotifications.notificationId, notificationId),
        eq(staffNotifications.recipient, staffActor(userId)),
      ),
    );
  if (!recipient || !notice) return null;
  const [tenant] = await tx
    .select({ name: tenants.name })
    .from(tenants)
    .where(eq(tenants.tenantId, tenantId));
  const organisation = tenant?.name ?? 'your organisation';
  const headline = HEADLINES[notice.topic] ?? 'a control changed';
  const link = noticeLink(options.publicUrl, notice.proposalId);
  return {
    to: recipient.email,
    subject: `${organisation}: ${headline}`,
    messageId: `<control-notice.${notificationId}@${messageIdHost(options.publicUrl)}>`,
    text: [
      `Idem, ${organisation}: ${headline} (${notice.createdAt.toISOString()}).`,
      '',
      `${notice.message}.`,
      '',
      ...(link
        ? ['Review it on the staff screens (sign in first):', '', link]
        : ['Review it on the Proposals screen of your staff console.']),
      '',
      `Every admin of ${organisation} receives this notice, the admin who made the change too. If you`,
      'did not expect it, do not approve it: refuse it on the proposal and tell your other admins.',
    ].join('\n'),
  };
}

/** The proposal's page on the staff screens (the Overview when a notice has no proposal). */
function noticeLink(publicUrl: string | null, proposalId: string | null): string | null {
  if (!publicUrl) return null;
  const origin = new URL(publicUrl).origin;
  return proposalId ? `${origin}/staff/proposals/${proposalId}` : `${origin}/staff/overview`;
}

function messageIdHost(publicUrl: string | null): string {
  return publicUrl ? new URL(publicUrl).hostname : 'idem.localhost';
}
