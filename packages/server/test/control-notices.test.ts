/**
 * No single admin moves money: every admin is told of every control change by e-mail
 * as well as on the Overview (I31-NOTICE). Over real HTTP on the real server with its mail sender
 * pointed at a local SMTP server, the way an admin's mailbox receives it: one admin proposes to
 * raise an asset's auto-approve limit, and each active admin (the proposer too: a hijacked session
 * is noticed by its owner) gets exactly one e-mail for it, in plain words with a link to the
 * proposal on IDEM_PUBLIC_URL, even when the mail server refuses the first attempt. Disabled
 * admins, invitees who never joined and non-admins get none.
 */
import { createStaffUser, NO_PASSWORD_YET, rowsOf, withTenant } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { type MailServer, type ReceivedMail, startMailServer } from '@idem/testing/mail';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { startSilentServer } from './support/in-process.ts';
import { provisionTenant, type TenantFixture } from './support/provision.ts';
import { dataOf, PASSWORD, staffHttp } from './support/staff-http.ts';

const PUBLIC_URL = 'https://idem.example.test';
const DOMAIN = 'notices.invalid';
let database: TestDatabase;
let mailServer: MailServer;
let server: RunningServer;
let base = '';
let tenant: TenantFixture;
const { call, signIn } = staffHttp(() => base, { origin: PUBLIC_URL });
const address = (name: string) => `${name}@${DOMAIN}`;
const session = (name: string) =>
  signIn({ tenantId: tenant.tenantId, email: address(name), password: PASSWORD });

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  tenant = await provisionTenant(database.db, { name: 'Noticed Exchange' });
  const passwordHash = await hashPassword(PASSWORD);
  await provisionRiskPolicy(database.db, {
    tenantId: tenant.tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: '1000000000000000000',
    fourEyesMinMinor: '5000000000000000000',
    velocityMaxPerHour: 10,
    actor: 'provisioning',
  });
  await withTenant(database.db, tenant.tenantId, async (tx) => {
    for (const name of ['admin1', 'admin2', 'admin3', 'gone']) {
      await createStaffUser(tx, {
        tenantId: tenant.tenantId,
        email: address(name),
        role: 'admin',
        passwordHash,
      });
    }
    await createStaffUser(tx, {
      tenantId: tenant.tenantId,
      email: address('approver'),
      role: 'approver',
      passwordHash,
    });
    // An admin invited and never joined: not active, so not mailed (the invitation is its only mail).
    await createStaffUser(tx, {
      tenantId: tenant.tenantId,
      email: address('invitee'),
      role: 'admin',
      passwordHash: NO_PASSWORD_YET,
    });
    await tx.execute(sql`update staff_users set disabled_at = now() where email = ${address('gone')}`);
  });
  mailServer = await startMailServer();
  ({ server, base } = await startSilentServer(database, {
    IDEM_SMTP_URL: mailServer.url,
    IDEM_MAIL_INTERVAL_MS: '100',
    IDEM_PUBLIC_URL: PUBLIC_URL,
  }));
});

afterAll(async () => {
  await server?.close();
  await mailServer?.close();
  await database?.dispose();
});

/** The tenant's control-notice e-mails not yet sent (pending work items). */
async function unsentNoticeMails(): Promise<number> {
  const rows = await withTenant(database.db, tenant.tenantId, async (tx) =>
    rowsOf<{ n: number }>(
      await tx.execute(
        sql`select count(*)::int as n from work_items where topic = 'mail.control_notice' and status <> 'done'`,
      ),
    ),
  );
  return rows[0]?.n ?? 0;
}

async function drained(): Promise<void> {
  await expect
    .poll(unsentNoticeMails, {
      timeout: 30_000,
      interval: 100,
      message: 'control-notice e-mails still unsent after 30 s',
    })
    .toBe(0);
  // Fixed: a few more sender passes, so that a second copy would have arrived by now; what does not
  // arrive cannot be polled for.
  await new Promise((resolve) => setTimeout(resolve, 500));
}

const about = (proposalId: string) => (mail: ReceivedMail) =>
  mail.links.some((link) => link.endsWith(proposalId));

describe('I31-NOTICE control changes are e-mailed to every active admin', () => {
  it('I31-NOTICE I31-QUORUM a proposed loosening sends one e-mail to each active admin, through the outbox: plain words, a link to the proposal, no addresses', async () => {
    const proposer = await session('admin1');
    // The relay refuses the first attempt: the outbox retries it, and still nobody gets two.
    mailServer.refuseNext(1);
    const raised = dataOf<{ outcome: string; proposalId: string }>(
      await call('staffConfig.setRiskRule', {
        mutation: true,
        session: proposer,
        input: {
          assetCode: 'ETH',
          autoApproveMaxMinor: '3000000000000000000',
          fourEyesMinMinor: '5000000000000000000',
          velocityMaxPerHour: 10,
        },
      }),
    );
    expect(raised.outcome).toBe('PROPOSED');
    const link = `${PUBLIC_URL}/staff/proposals/${raised.proposalId}`;
    for (const name of ['admin1', 'admin2', 'admin3']) {
      const mail = await mailServer.waitFor(address(name), { where: about(raised.proposalId) });
      expect(mail.subject).toContain('Noticed Exchange');
      expect(mail.subject.toLowerCase()).toContain('proposed');
      expect(mail.text).toContain('ETH risk rule');
      expect(mail.text).toContain('auto-approve 3000000000000000000');
      expect(mail.links).toEqual([link]);
      // Ids, not addresses: nobody's e-mail address is in the body (staff:<id> as the screens show).
      expect(mail.text).not.toContain('@');
    }
    await drained();
    expect(mailServer.refused()).toBe(1);
    const count = (name: string) =>
      mailServer.messages.filter((mail) => mail.to.includes(address(name)) && about(raised.proposalId)(mail))
        .length;
    expect({
      admin1: count('admin1'),
      admin2: count('admin2'),
      admin3: count('admin3'),
      gone: count('gone'),
      invitee: count('invitee'),
      approver: count('approver'),
    }).toEqual({ admin1: 1, admin2: 1, admin3: 1, gone: 0, invitee: 0, approver: 0 });
    // Sent items keep ids only: no address and no body in the outbox.
    const payloads = await withTenant(database.db, tenant.tenantId, async (tx) =>
      rowsOf<{ payload: Record<string, unknown> }>(
        await tx.execute(sql`select payload from work_items where topic = 'mail.control_notice'`),
      ),
    );
    expect(payloads.length).toBe(3);
    for (const { payload } of payloads)
      expect(Object.keys(payload).sort()).toEqual(['notificationId', 'userId']);
  });

  it('I31-NOTICE the approval is e-mailed too, with the time the change takes effect', async () => {
    const proposer = await session('admin1');
    const other = await session('admin2');
    const raised = dataOf<{ proposalId: string }>(
      await call('staffConfig.setRiskRule', {
        mutation: true,
        session: proposer,
        input: {
          assetCode: 'ETH',
          autoApproveMaxMinor: '4000000000000000000',
          fourEyesMinMinor: '5000000000000000000',
          velocityMaxPerHour: 10,
        },
      }),
    );
    const proposal = dataOf<{ payloadHash: string }>(
      await call('staffProposals.get', { session: other, input: { proposalId: raised.proposalId } }),
    );
    const decided = dataOf<{ proposal: { effectiveAt: string } }>(
      await call('staffProposals.decide', {
        mutation: true,
        session: other,
        input: { proposalId: raised.proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
      }),
    );
    const effectiveAt = new Date(decided.proposal.effectiveAt).toISOString();
    for (const name of ['admin1', 'admin2', 'admin3']) {
      const mail = await mailServer.waitFor(address(name), {
        where: (m) => about(raised.proposalId)(m) && m.subject.toLowerCase().includes('approved'),
      });
      expect(mail.text).toContain(effectiveAt);
    }
  });
});
