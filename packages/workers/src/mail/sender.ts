import { scrubbedError } from '@idem/contracts';
import {
  CONTROL_NOTICE_MAIL_TOPIC,
  controlNoticeMailOf,
  type Database,
  forgetInvitationLink,
  INVITATION_MAIL_TOPIC,
  invitationMailOf,
} from '@idem/core';
import type { Logger } from 'pino';
import { tenantsWithWork } from '../candidates.ts';
import { processWorkItems } from '../work-items.ts';
import type { Mailer } from './mailer.ts';

export interface MailSenderOptions {
  db: Database;
  mailer: Mailer;
  log: Logger;
  /** Messages per tenant per pass. */
  batchSize?: number;
  /** IDEM_PUBLIC_URL: where the links in control-change notices point (none without it). */
  publicUrl?: string | null;
}

export interface MailSender {
  /** One pass over the tenants with due work: sends their due invitation and control-notice e-mails. Returns how many items it handled. */
  runOnce(): Promise<number>;
  /** Passes every `intervalMs` until `stop`. */
  start(intervalMs: number): void;
  stop(): Promise<void>;
}

/**
 * Drains the mail outbox (`mail.staff_invitation` and `mail.control_notice` work items) through a mailer. Each item is sent
 * inside the transaction that completes it, through the work-item machinery: a failed send is
 * retried with a growing delay and dead-lettered with an ALERT after the last attempt; a send whose
 * completion did not commit is sent again (at least once, never lost). Safe to run in many
 * processes at once (SKIP LOCKED). It moves no money, so it runs apart from the money worker: a
 * server that runs no worker still sends its invitations.
 */
export function createMailSender(options: MailSenderOptions): MailSender {
  const ctx = {
    db: options.db,
    log: options.log.child({ component: 'mail' }),
    batchSize: options.batchSize ?? 20,
  };
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;

  const runOnce = async (): Promise<number> => {
    let handled = 0;
    // Tenant ids only, from the scheduler's SECURITY DEFINER function (due work items included).
    for (const tenantId of await tenantsWithWork(ctx.db, 0)) {
      handled += await processWorkItems(ctx, tenantId, INVITATION_MAIL_TOPIC, async (tx, item) => {
        const message = await invitationMailOf(tx, tenantId, item.payload);
        if (message) {
          await options.mailer.send(message);
          await forgetInvitationLink(tx, tenantId, item.workId);
        }
        // The address and the link are left out of the log: personal data and a secret.
        ctx.log.info({ tenantId, workId: item.workId, sent: message !== null }, 'invitation e-mail handled');
      });
      handled += await processWorkItems(ctx, tenantId, CONTROL_NOTICE_MAIL_TOPIC, async (tx, item) => {
        const message = await controlNoticeMailOf(tx, tenantId, item.payload, {
          publicUrl: options.publicUrl ?? null,
        });
        if (message) await options.mailer.send(message);
        // Ids only: the address stays out of the log (personal data), as for invitations.
        ctx.log.info(
          { tenantId, workId: item.workId, sent: message !== null },
          'control notice e-mail handled',
        );
      });
    }
    return handled;
  };

  return {
    runOnce,
    start(intervalMs) {
      const tick = () => {
        if (stopped) return;
        running = runOnce()
          .catch((error: unknown) =>
            ctx.log.error({ message: scrubbedError(error, 300) }, 'mail pass failed'),
          )
          .finally(() => {
            if (!stopped) timer = setTimeout(tick, intervalMs);
          });
      };
      tick();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
