import type { Database } from '@idem/core';
import { createMailSender, type MailSender, printingMailer, smtpMailer } from '@idem/workers';
import type { Logger } from 'pino';
import type { Env } from './env.ts';

/**
 * The mail sender in this process: invitation and control-notice e-mails from the outbox, through
 * IDEM_SMTP_URL (notices link to their proposal on IDEM_PUBLIC_URL).
 * Development without one prints each e-mail to the console (`pnpm start`); a deployment without
 * one sends nothing, says so once, and its invitations wait in the outbox until a server with a
 * mail server set sends them. It runs whether or not this process runs the money worker.
 */
export function startMailSender(
  env: Env,
  db: Database,
  log: Logger,
  options: { development: boolean; announce: (line: string) => void },
): MailSender | null {
  let mailer = null;
  if (env.IDEM_SMTP_URL) mailer = smtpMailer({ url: env.IDEM_SMTP_URL, from: env.IDEM_MAIL_FROM });
  else if (options.development) mailer = printingMailer(options.announce);
  if (!mailer) {
    log.warn(
      'IDEM_SMTP_URL is not set: invitation and control-notice e-mails wait in the outbox and nobody can join the team',
    );
    return null;
  }
  const sender = createMailSender({ db, mailer, log, publicUrl: env.IDEM_PUBLIC_URL ?? null });
  sender.start(env.IDEM_MAIL_INTERVAL_MS);
  return sender;
}
