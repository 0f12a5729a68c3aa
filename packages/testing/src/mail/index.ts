import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** One message the test SMTP server accepted, parsed as a mail client would read it. */
export interface ReceivedMail {
  /** The envelope's recipients (RCPT TO), lower-cased. */
  to: string[];
  from: string;
  subject: string;
  text: string;
  /** Every http(s) link in the plain-text body, in order. */
  links: string[];
}

export interface MailServer {
  /** `smtp://127.0.0.1:<port>`: what a sender's SMTP URL setting takes. */
  url: string;
  port: number;
  /** Every message accepted so far, oldest first. */
  messages: ReceivedMail[];
  /** The first message to `recipient` that `where` accepts, waited for up to `timeoutMs`. */
  waitFor(
    recipient: string,
    options?: { where?: (mail: ReceivedMail) => boolean; timeoutMs?: number },
  ): Promise<ReceivedMail>;
  /** Answers the next `count` messages with a temporary failure (451), as a relay in trouble does. */
  refuseNext(count: number): void;
  /** How many messages were refused so far. */
  refused(): number;
  close(): Promise<void>;
}

const MESSAGE_BYTES_MAX = 1_000_000;

/**
 * A real SMTP server on 127.0.0.1 and a free port, for tests that must read what the product
 * mailed (an invitation's link) the way the recipient would: over SMTP, parsed from MIME. Plain
 * SMTP without authentication or STARTTLS, so a sender pointed at `url` needs no certificate.
 */
export async function startMailServer(): Promise<MailServer> {
  const messages: ReceivedMail[] = [];
  const waiters = new Set<() => void>();
  const refusals = { pending: 0, done: 0 };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    size: MESSAGE_BYTES_MAX,
    logger: false,
    onData(stream, session, callback) {
      if (refusals.pending > 0) {
        refusals.pending -= 1;
        refusals.done += 1;
        stream.resume();
        stream.once('end', () =>
          callback(Object.assign(new Error('try again later'), { responseCode: 451 })),
        );
        return;
      }
      simpleParser(stream).then(
        (parsed) => {
          const text = parsed.text ?? '';
          messages.push({
            to: session.envelope.rcptTo.map((recipient) => recipient.address.toLowerCase()),
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            subject: parsed.subject ?? '',
            text,
            links: text.match(/https?:\/\/[^\s<>"]+/g) ?? [],
          });
          for (const wake of waiters) wake();
          callback();
        },
        (error: Error) => callback(error),
      );
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.server.address() as AddressInfo;

  const find = (recipient: string, where: (mail: ReceivedMail) => boolean) =>
    messages.find((mail) => mail.to.includes(recipient.toLowerCase()) && where(mail));

  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    messages,
    waitFor(recipient, options = {}) {
      const where = options.where ?? (() => true);
      const timeoutMs = options.timeoutMs ?? 60_000;
      const found = find(recipient, where);
      if (found) return Promise.resolve(found);
      // Woken by each message the server accepts, not by polling: no fixed sleep.
      return new Promise<ReceivedMail>((resolve, reject) => {
        const wake = () => {
          const mail = find(recipient, where);
          if (!mail) return;
          waiters.delete(wake);
          clearTimeout(timer);
          resolve(mail);
        };
        const timer = setTimeout(() => {
          waiters.delete(wake);
          reject(new Error(`no mail to ${recipient} within ${timeoutMs} ms (${messages.length} received)`));
        }, timeoutMs);
        waiters.add(wake);
      });
    },
    refuseNext(count) {
      refusals.pending = count;
    },
    refused: () => refusals.done,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
