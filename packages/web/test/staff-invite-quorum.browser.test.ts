import { createStaffUser, createTenant, type Database, setTenantGovernance, withTenant } from '@idem/core';
import { hashPassword } from '@idem/server';
import { type MailServer, startMailServer } from '@idem/testing/mail';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  newPage,
  PASSWORD,
  type Stack,
  screenshot,
  seriousViolations,
  signInStaff,
  startStack,
} from './support/stack.ts';

/**
 * Inviting a member in quorum mode (I31-QUORUM), in a real Chromium against the real server with
 * a worker in its process: admin A's invite is only proposed (the screen says it went to the other
 * admins, and no e-mail leaves); admin B approves it where proposals are decided; the worker's
 * governance step applies it (the tenant's delay is 0, the step runs every second), which creates
 * the invitation and e-mails its link over a real local SMTP server; the invitee accepts from the
 * link, and the Team screen shows their cooling-off period.
 */
const DELTA = {
  name: 'Delta Exchange',
  adminA: 'admin-a@delta.invalid',
  adminB: 'admin-b@delta.invalid',
  invitee: 'new-approver@delta.invalid',
  tenantId: '',
};

let stack: Stack;
let mailServer: MailServer;

/** A tenant in quorum mode from its first minute: two admins, no TOTP, no loosening delay. */
async function provisionDelta(db: Database): Promise<void> {
  const { tenantId } = await createTenant(db, { name: DELTA.name, mfaRequired: false });
  DELTA.tenantId = tenantId;
  const passwordHash = await hashPassword(PASSWORD);
  await withTenant(db, tenantId, async (tx) => {
    for (const email of [DELTA.adminA, DELTA.adminB])
      await createStaffUser(tx, { tenantId, email, role: 'admin', passwordHash });
  });
  await setTenantGovernance(db, { tenantId, looseningDelaySeconds: 0 });
}

beforeAll(async () => {
  mailServer = await startMailServer();
  stack = await startStack({
    provisionMore: provisionDelta,
    mail: mailServer,
    // The worker in the server's process, so its governance step applies the approved invite.
    serverEnv: { IDEM_WORKER_IN_PROCESS: 'true', IDEM_GOVERNANCE_EVERY_MS: '1000' },
  });
});

afterAll(async () => {
  await stack?.stop();
  await mailServer?.close();
});

describe('I31-QUORUM inviting a member needs another admin', () => {
  it('I31-QUORUM admin A invites, admin B approves in the browser, the invitee gets the e-mail, accepts from its link, and the Team screen shows their cooling-off period', async () => {
    const adminA = await newPage(stack);
    await signInStaff(adminA, DELTA.tenantId, DELTA.adminA);
    await adminA.goto('/staff/team');
    await adminA.getByTestId('team-table').waitFor();
    await adminA.getByLabel('E-mail').fill(DELTA.invitee);
    await adminA.getByRole('button', { name: 'Invite' }).click();
    const proposed = adminA.getByTestId('invitation-proposed');
    await proposed.waitFor();
    expect(await proposed.textContent()).toContain('Sent to the other admins for approval');
    expect(await adminA.getByTestId('invitation-sent').count()).toBe(0);
    expect(await seriousViolations(adminA)).toEqual([]);
    await screenshot(adminA, 'staff-team-invite-proposed');
    const proposalId = (await proposed.getAttribute('data-proposal-id')) ?? '';
    expect(proposalId).toMatch(/^[0-9a-f-]{36}$/);
    // Nobody was added, and nothing was mailed to the invitee.
    await adminA.reload();
    await adminA.getByTestId('team-table').waitFor();
    expect(await adminA.locator(`[data-testid="team-member"][data-email="${DELTA.invitee}"]`).count()).toBe(
      0,
    );
    expect(mailServer.messages.filter((mail) => mail.to.includes(DELTA.invitee))).toEqual([]);
    // The proposer is offered no approval of their own invite.
    await adminA.goto(`/staff/proposals/${proposalId}`);
    await adminA.getByTestId('proposal-card').waitFor();
    expect(await adminA.getByTestId('proposal-approve').count()).toBe(0);

    const adminB = await newPage(stack);
    await signInStaff(adminB, DELTA.tenantId, DELTA.adminB);
    await adminB.goto(`/staff/proposals/${proposalId}`);
    const card = adminB.getByTestId('proposal-card');
    await card.waitFor();
    expect(await card.textContent()).toContain(DELTA.invitee);
    expect(await seriousViolations(adminB)).toEqual([]);
    await card.getByTestId('proposal-approve').click();
    // The decision is recorded before the page reloads: a reload would cancel the request in flight.
    await adminB.getByTestId('proposal-decision-result').waitFor();
    // Approved, then applied by the worker's governance step (delay 0, every second).
    await expect
      .poll(
        async () => {
          await adminB.reload();
          return adminB
            .getByTestId('proposal-state')
            .textContent()
            .catch(() => '');
        },
        { timeout: 60_000, interval: 1_000 },
      )
      .toContain('EXECUTED');
    await adminB.context().close();

    const mail = await mailServer.waitFor(DELTA.invitee, { timeoutMs: 30_000 });
    const invitationUrl = mail.links.find((link) => link.includes('/staff/invite#')) ?? '';
    expect(invitationUrl.startsWith(`${stack.baseUrl}/staff/invite#`)).toBe(true);
    const invitee = await newPage(stack);
    await invitee.goto(invitationUrl);
    await invitee.getByRole('heading', { name: 'Join your team' }).waitFor();
    await invitee.getByLabel('New password').and(invitee.locator('input')).fill(PASSWORD);
    await invitee.getByLabel('Repeat the password').and(invitee.locator('input')).fill(PASSWORD);
    await invitee.getByRole('button', { name: 'Set password and sign in' }).click();
    await invitee.getByTestId('signed-in-as').waitFor();
    expect(await invitee.getByTestId('signed-in-as').textContent()).toContain(`${DELTA.invitee} (approver)`);
    await invitee.context().close();
    // Exactly one invitation e-mail reached the invitee.
    expect(mailServer.messages.filter((m) => m.to.includes(DELTA.invitee))).toHaveLength(1);

    await adminA.goto('/staff/team');
    const row = adminA.locator(`[data-testid="team-member"][data-email="${DELTA.invitee}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('active');
    expect(await row.getByTestId('approvals-from').textContent()).toMatch(/^can approve from /);
    expect(await seriousViolations(adminA)).toEqual([]);
    await screenshot(adminA, 'staff-team-invite-approved');
    await adminA.context().close();
  }, 180_000);
});
