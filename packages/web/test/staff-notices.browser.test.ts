import { createStaffUser, createTenant, setTenantGovernance, withTenant } from '@idem/core';
import { hashPassword } from '@idem/server';
import { type MailServer, startMailServer } from '@idem/testing/mail';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ETH,
  newPage,
  PASSWORD,
  type Stack,
  screenshot,
  seriousViolations,
  signInStaff,
  startStack,
} from './support/stack.ts';

/**
 * A loosened risk rule visibly waits out its delay, and every admin is told (I31-QUORUM,
 * I31-NOTICE), in a real Chromium against the real server process with a worker in it (its
 * governance step every half second) and a local SMTP server: admin A raises ETH's auto-approve
 * limit; the risk screen shows it waiting for approval; admin B finds it on the Overview's notices
 * card (and in their mailbox), approves it; the risk screen and the Overview show it waiting with
 * its effective time while the old limit stays in force; after the tenant's delay (six seconds
 * here) the worker applies it and the screen shows the new limit, and the card says so.
 */
const DELAY_SECONDS = 6;
const OLD_LIMIT = ETH.toString();
const NEW_LIMIT = (2n * ETH).toString();
let stack: Stack;
let mailServer: MailServer;
const gamma = { tenantId: '', adminA: 'a@gamma-exchange.invalid', adminB: 'b@gamma-exchange.invalid' };

beforeAll(async () => {
  mailServer = await startMailServer();
  stack = await startStack({
    mail: { url: mailServer.url },
    serverEnv: {
      IDEM_WORKER_IN_PROCESS: 'true',
      IDEM_WORKER_INTERVAL_MS: '200',
      IDEM_GOVERNANCE_EVERY_MS: '500',
    },
    // A tenant of two admins and nothing in flight, so the worker has nothing to do but governance.
    provisionMore: async (db) => {
      const { tenantId } = await createTenant(db, { name: 'Gamma Exchange', mfaRequired: false });
      gamma.tenantId = tenantId;
      const passwordHash = await hashPassword(PASSWORD);
      await provisionRiskPolicy(db, {
        tenantId,
        assetCode: 'ETH',
        autoApproveMaxMinor: OLD_LIMIT,
        fourEyesMinMinor: (5n * ETH).toString(),
        velocityMaxPerHour: 10,
        actor: 'provisioning',
      });
      await withTenant(db, tenantId, async (tx) => {
        for (const email of [gamma.adminA, gamma.adminB]) {
          await createStaffUser(tx, { tenantId, email, role: 'admin', passwordHash });
        }
      });
      await setTenantGovernance(db, { tenantId, looseningDelaySeconds: DELAY_SECONDS });
    },
  });
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  await mailServer?.close();
});

async function openRiskRules(page: Page): Promise<void> {
  await page.getByRole('link', { name: 'Risk rules' }).click();
  await page.getByTestId('risk-rule-ETH').waitFor();
}

describe('I31-QUORUM I31-NOTICE a loosened risk rule waits out its delay on the screens', () => {
  it('I31-QUORUM I31-NOTICE admin A raises the ETH auto-approve limit, admin B approves it from the notices card; the screens show it waiting with its effective time, then in force after the delay', async () => {
    const a = await newPage(stack);
    await signInStaff(a, gamma.tenantId, gamma.adminA);
    await openRiskRules(a);
    await a.getByRole('combobox', { name: 'Asset' }).click();
    await a.getByRole('option', { name: 'ETH' }).click();
    await a.getByLabel('Auto-approve limit (minor units)').fill(NEW_LIMIT);
    await a.getByRole('button', { name: 'Save rule' }).click();
    await a.getByRole('status').getByText('Proposed').waitFor();
    // Proposed, not applied: the rule in force is unchanged, and the change waits for an approval.
    await expect(a.getByTestId('risk-rule-ETH').textContent()).resolves.toContain(`(${OLD_LIMIT})`);
    const waitingA = a.getByTestId('risk-waiting').locator('[data-state="PENDING"]');
    await waitingA.waitFor();
    await expect(waitingA.textContent()).resolves.toContain(NEW_LIMIT);
    const proposalId = await waitingA.getAttribute('data-proposal-id');
    expect(proposalId).toMatch(/^[0-9a-f-]{36}$/);

    // B is told on the Overview and by e-mail, and opens the proposal from the notice.
    const b = await newPage(stack);
    await signInStaff(b, gamma.tenantId, gamma.adminB);
    const proposed = b
      .getByTestId('overview-notices')
      .locator(`[data-proposal-id="${proposalId}"][data-topic="control_change_proposed"]`);
    await proposed.waitFor();
    await expect(proposed.textContent()).resolves.toContain('ETH risk rule');
    const mail = await mailServer.waitFor(gamma.adminB, {
      where: (m) => m.subject.includes('proposed') && m.text.includes(`auto-approve ${NEW_LIMIT}`),
    });
    expect(mail.subject).toContain('Gamma Exchange');
    await proposed.getByRole('link').click();
    await b.waitForURL(`**/staff/proposals/${proposalId}`);
    const approvedAt = Date.now();
    await b.getByTestId('proposal-approve').click();
    await b.getByTestId('proposal-decision-result').waitFor();

    // Approved, waiting out the delay: the risk screen shows when it takes effect; the old limit holds.
    await openRiskRules(b);
    const waitingB = b.getByTestId('risk-waiting').locator(`[data-proposal-id="${proposalId}"]`);
    await waitingB.and(b.locator('[data-state="APPROVED"]')).waitFor();
    const effectiveAt = Date.parse((await waitingB.getAttribute('data-effective-at')) ?? '');
    expect(effectiveAt).toBeGreaterThan(approvedAt + (DELAY_SECONDS - 2) * 1000);
    expect(effectiveAt).toBeLessThan(Date.now() + DELAY_SECONDS * 1000 + 2000);
    await expect(waitingB.textContent()).resolves.toContain('takes effect');
    await expect(b.getByTestId('risk-rule-ETH').textContent()).resolves.toContain(`(${OLD_LIMIT})`);
    expect(await seriousViolations(b)).toEqual([]);
    await screenshot(b, 'risk-rule-waiting');

    // After the delay the worker's governance step applies it; the screen reads again by itself.
    await b
      .getByTestId('risk-rule-ETH')
      .getByText(`(${NEW_LIMIT})`)
      .waitFor({ timeout: (DELAY_SECONDS + 20) * 1000 });
    expect(Date.now()).toBeGreaterThanOrEqual(effectiveAt);
    await b
      .getByTestId('risk-waiting')
      .locator(`[data-proposal-id="${proposalId}"]`)
      .waitFor({ state: 'detached' });

    // A's Overview lists every step, newest first, each with its time and a link to the proposal.
    await a.getByRole('link', { name: 'Overview', exact: true }).click();
    const notices = a.getByTestId('overview-notices');
    await notices
      .locator(`[data-proposal-id="${proposalId}"][data-topic="control_change_applied"]`)
      .waitFor();
    const topics = await notices
      .locator(`[data-proposal-id="${proposalId}"]`)
      .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-topic')));
    expect(topics).toEqual(['control_change_applied', 'control_change_approved', 'control_change_proposed']);
    await expect(
      notices
        .locator(`[data-topic="control_change_approved"][data-proposal-id="${proposalId}"]`)
        .textContent(),
    ).resolves.toContain('takes effect');
    expect(await seriousViolations(a)).toEqual([]);
    await screenshot(a, 'overview-notices');
    await a.context().close();
    await b.context().close();
  }, 180_000);
});
