import type { StaffRole } from '@idem/contracts';
import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Tx } from '../db/connect.ts';
import { tenants, workItems } from '../db/schema/index.ts';
import { enqueue } from '../outbox/enqueue.ts';

/**
 * The invitation e-mail, through the transactional outbox: a `mail.staff_invitation` work item
 * written with the invitation, so an invitation never exists without its e-mail on the way, and
 * the mail sender (workers' mail step) drains it with retries. The item holds the link (the only
 * copy of the token outside the invitee's mailbox) until it is sent; sending removes it.
 */

export const INVITATION_MAIL_TOPIC = 'mail.staff_invitation' as const;

const invitationMailPayloadSchema = z.object({
  userId: z.uuid(),
  to: z.email(),
  role: z.string(),
  link: z.url(),
  expiresAt: z.iso.datetime(),
});
export type InvitationMailPayload = z.infer<typeof invitationMailPayloadSchema>;

/** A plain-text e-mail, as a sender hands it to SMTP. */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  /** The Message-ID header, when a message must be recognisable if it is ever sent twice. */
  messageId?: string;
}

export async function enqueueInvitationMail(
  tx: Tx,
  input: { tenantId: string; userId: string; to: string; role: StaffRole; link: string; expiresAt: Date },
): Promise<string> {
  const payload: InvitationMailPayload = {
    userId: input.userId,
    to: input.to,
    role: input.role,
    link: input.link,
    expiresAt: input.expiresAt.toISOString(),
  };
  return enqueue(tx, { tenantId: input.tenantId, topic: INVITATION_MAIL_TOPIC, payload });
}

/**
 * The message for one invitation work item, or null when its link is gone (already sent by an
 * earlier attempt that could not be marked done): such an item is completed without sending twice.
 */
export async function invitationMailOf(
  tx: Tx,
  tenantId: string,
  payload: unknown,
): Promise<MailMessage | null> {
  const parsed = invitationMailPayloadSchema.safeParse(payload);
  if (!parsed.success) return null;
  const [tenant] = await tx
    .select({ name: tenants.name })
    .from(tenants)
    .where(eq(tenants.tenantId, tenantId));
  const organisation = tenant?.name ?? 'your organisation';
  const { to, role, link, expiresAt } = parsed.data;
  return {
    to,
    subject: `You are invited to join ${organisation} on Idem`,
    text: [
      `You have been invited to join ${organisation}'s staff on Idem as ${role}.`,
      '',
      'Open this link to choose your password; it works once, and only until',
      `${expiresAt} (UTC):`,
      '',
      link,
      '',
      'If you did not expect this invitation, do not open the link: tell the organisation.',
      'Nobody from the organisation will ever ask you for this link.',
    ].join('\n'),
  };
}

/** After sending: the work item keeps who was mailed and when the link expires, not the link. */
export async function forgetInvitationLink(tx: Tx, tenantId: string, workId: string): Promise<void> {
  await tx
    .update(workItems)
    .set({ payload: sql`${workItems.payload} - 'link'` })
    .where(and(eq(workItems.tenantId, tenantId), eq(workItems.workId, workId)));
}
