import type { MailMessage } from '@idem/core';
import nodemailer from 'nodemailer';

/** Hands one plain-text e-mail on; resolves once the next hop (an SMTP server) has accepted it. */
export interface Mailer {
  send(message: MailMessage): Promise<void>;
}

/**
 * A mailer over SMTP (nodemailer). The URL carries host, port, TLS and credentials:
 * `smtps://user:password@smtp.example.com:465`, or `smtp://...:587` (STARTTLS when the server
 * offers it). Every wait is bounded, so a hanging relay fails the attempt and the outbox retries.
 */
export function smtpMailer(options: { url: string; from: string }): Mailer {
  const transport = nodemailer.createTransport({
    url: options.url,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
  });
  return {
    async send(message) {
      await transport.sendMail({
        from: options.from,
        to: message.to,
        subject: message.subject,
        text: message.text,
        ...(message.messageId ? { messageId: message.messageId } : {}),
      });
    },
  };
}

/**
 * Development without an SMTP server: the message is written where the person running the
 * server reads (the `pnpm start` console), links and all. Never used when a mail server is set.
 */
export function printingMailer(print: (line: string) => void): Mailer {
  return {
    async send(message) {
      print(
        [
          '',
          `Idem: development mail (no IDEM_SMTP_URL set), to ${message.to}`,
          `  Subject: ${message.subject}`,
          ...message.text.split('\n').map((line) => `  ${line}`),
          '',
        ].join('\n'),
      );
    },
  };
}
