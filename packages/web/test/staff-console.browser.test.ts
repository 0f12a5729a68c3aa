import type { StaffRole } from '@idem/contracts';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newPage, type Stack, signInStaff, startStack } from './support/stack.ts';

/**
 * Each role sees its own console, in a real Chromium against the real server process: the menu
 * lists exactly the screens the role may use; visiting each of them logs no console error and
 * gets no refused (4xx/5xx) answer; a screen the role may not use, opened by its address, says so
 * without asking the server; and the Overview lists the proposals waiting for this member.
 */
let stack: Stack;

/** Every role's screens (the spec the menu must meet), in menu order. */
const READ = [
  'Overview',
  'Withdrawals',
  'Approval queue',
  'Proposals',
  'BROADCAST queue',
  'UNKNOWN queue',
  'FAILED_TERMINAL queue',
  'Search',
  'Wallet nonces',
  'Reconciliation breaks',
  'Balance reconciliation',
  // Every role reads the freezes in force; only operate freezes (I33-FREEZE).
  'Freeze',
  'Webhook inbox',
  'Outbound webhooks',
  'Risk rules',
  // Every member's own passkeys (I32-PASSKEY).
  'Passkeys',
];
const OPERATE = ['New withdrawal', 'Adjustments and credits', 'API keys', 'Webhook endpoints'];
const ADMINISTER = ['Branding', 'Team', 'Audit log'];

const EXPECTED: Record<StaffRole, string[]> = {
  support: READ,
  approver: READ,
  operator: [...READ, ...OPERATE],
  admin: [...READ, ...OPERATE, ...ADMINISTER],
};

/** What the page logged and which answers it got, from the moment it is opened. */
function watch(page: Page) {
  const problems: string[] = [];
  let inFlight = 0;
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('request', () => {
    inFlight += 1;
  });
  page.on('requestfinished', async (request) => {
    inFlight -= 1;
    const response = await request.response();
    if (response && response.status() >= 400) problems.push(`${response.status()} ${request.url()}`);
  });
  page.on('requestfailed', (request) => {
    inFlight -= 1;
    problems.push(`failed ${request.url()}`);
  });
  const requests: string[] = [];
  page.on('request', (request) => requests.push(request.url()));
  return { problems, requests, idle: () => inFlight === 0 };
}

/** The menu's own screens (the API reference is a page of the server, not of this app). */
async function menuLabels(page: Page): Promise<string[]> {
  const links = page.getByRole('navigation', { name: 'Staff sections' }).locator('a[href^="/staff/"]');
  return (await links.allTextContents()).map((text) => text.trim());
}

/** Waits until the screen has loaded what it reads: no loader shown and no request open. */
async function settled(page: Page, idle: () => boolean): Promise<void> {
  await expect
    .poll(async () => idle() && (await page.getByLabel(/^Loading/).count()) === 0, { timeout: 20_000 })
    .toBe(true);
}

beforeAll(async () => {
  stack = await startStack();
}, 180_000);

afterAll(async () => {
  await stack?.stop();
});

describe('I31-CONSOLE each role sees its own console', () => {
  it('I31-CONSOLE the menu of each role is exactly its screens, each opens without an error or a refusal, and a forbidden address shows a notice without asking the server', async () => {
    for (const role of ['support', 'operator', 'approver', 'admin'] as const) {
      const member = role === 'approver' ? stack.a.staff.approver1 : stack.a.staff[role];
      const page = await newPage(stack);
      const seen = watch(page);
      await signInStaff(page, stack.a.tenantId, member.email);
      await page.waitForURL('**/staff/overview');
      const labels = await menuLabels(page);
      expect({ role, labels: [...labels].sort() }).toEqual({ role, labels: [...EXPECTED[role]].sort() });

      const nav = page.getByRole('navigation', { name: 'Staff sections' });
      for (const label of labels) {
        await nav.getByRole('link', { name: label, exact: true }).click();
        await expect
          .poll(() => nav.locator('[aria-current="page"]').textContent(), { timeout: 30_000 })
          .toBe(label);
        await settled(page, seen.idle);
      }
      expect({ role, problems: seen.problems }).toEqual({ role, problems: [] });

      if (role !== 'admin') {
        const before = seen.requests.length;
        // Opened by its address (a bookmark, a link pasted in chat): a full load, then no API call.
        await page.goto('/staff/team');
        await page.getByTestId('not-available').waitFor();
        await expect(page.getByTestId('not-available').textContent()).resolves.toContain(
          'not available to your role',
        );
        await settled(page, seen.idle);
        const calls = seen.requests.slice(before).filter((url) => url.includes('/trpc/staffTeam'));
        expect(calls).toEqual([]);
        expect({ role, problems: seen.problems }).toEqual({ role, problems: [] });
      }
      await page.context().close();
    }
  }, 300_000);

  it('I31-CONSOLE the Overview lists the proposals waiting for this member: an approver and an admin see the operator’s adjustment and open it; the operator who proposed it and support do not', async () => {
    const operator = await newPage(stack);
    await signInStaff(operator, stack.a.tenantId, stack.a.staff.operator.email);
    await operator.getByRole('link', { name: 'Adjustments and credits' }).click();
    const form = operator.getByTestId('form-adjustment');
    await form.getByRole('textbox', { name: 'Account' }).fill('cust-console');
    await form.getByRole('combobox', { name: 'Asset' }).click();
    await operator.getByRole('option', { name: 'ETH (ethereum)' }).click();
    await form.getByLabel(/^Amount in/).fill('0.25');
    await form.getByRole('textbox', { name: 'Reason' }).fill('goodwill credit, ticket 3101');
    await form.getByTestId('propose-adjustment').click();
    const made = operator.getByTestId('proposal-made').getByTestId('proposal-card');
    await made.waitFor();
    const proposalId = await made.getAttribute('data-proposal-id');
    expect(proposalId).toMatch(/^[0-9a-f-]{36}$/);

    // The proposer may not approve their own: their Overview has nothing waiting for them.
    await operator.getByRole('link', { name: 'Overview', exact: true }).click();
    // The card shows its title while the list loads: wait for the answer, not the card.
    await operator.getByTestId('awaiting-me').getByText('Nothing is waiting for your decision').waitFor();
    await operator.context().close();

    for (const member of [stack.a.staff.approver1, stack.a.staff.admin]) {
      const page = await newPage(stack);
      const seen = watch(page);
      await signInStaff(page, stack.a.tenantId, member.email);
      const row = page.getByTestId('awaiting-me').locator(`[data-proposal-id="${proposalId}"]`);
      await row.waitFor();
      await expect(row.textContent()).resolves.toContain('Adjustment');
      await row.getByRole('link').click();
      await page.waitForURL(`**/staff/proposals/${proposalId}`);
      const card = page.getByTestId('proposal-card');
      await card.waitFor();
      await expect(card.getAttribute('data-proposal-id')).resolves.toBe(proposalId);
      await expect(card.getByTestId('proposal-approve').count()).resolves.toBe(1);
      await settled(page, seen.idle);
      expect({ member: member.role, problems: seen.problems }).toEqual({ member: member.role, problems: [] });
      await page.context().close();
    }

    // Support reads proposals but decides none: nothing waits for them.
    const support = await newPage(stack);
    await signInStaff(support, stack.a.tenantId, stack.a.staff.support.email);
    // The card shows its title while the list loads: wait for the answer, not the card.
    await support.getByTestId('awaiting-me').getByText('Nothing is waiting for your decision').waitFor();
    await support.context().close();
  }, 180_000);
});
