import {
  createStaffUser,
  createTenant,
  createWithdrawal,
  creditAsOperator,
  type Database,
  reviewWithdrawal,
  withTenant,
} from '@idem/core';
import { hashPassword } from '@idem/server';
import { type MailServer, startMailServer } from '@idem/testing/mail';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { generate } from 'otplib';
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ETH,
  newPage,
  PASSWORD,
  type Stack,
  screenshot,
  seriousViolations,
  startStack,
} from './support/stack.ts';

/**
 * Staff sign-in and the team in a real Chromium against the real server: a tenant that requires TOTP (the default),
 * its admin enrolling from the QR code's otpauth URL and approving after a step-up code, then
 * inviting an approver, whose one-time link arrives by e-mail over a real local SMTP server (never
 * on the admin's screen); the approver sets a password through it and enrols, and their approval is
 * refused until the cooling-off period the Team screen shows has passed. Codes come from otplib, as
 * an authenticator app computes them.
 */
const GAMMA = {
  name: 'Gamma Exchange',
  slug: 'gamma-exchange',
  admin: 'admin@gamma.invalid',
  approver: 'approver@gamma.invalid',
  // The shortest step-up window the tenant setting allows.
  freshSeconds: 30,
};
/**
 * The step-up window this test's server allows at most (IDEM_MFA_FRESH_SECONDS_MAX), shorter than
 * any tenant's, so the test outwaits it in seconds rather than the tenant's half minute.
 */
const STEP_UP_SECONDS = 5;
const destinations = {
  byAdmin: '0x8888888888888888888888888888888888888888',
  byApprover: '0x9999999999999999999999999999999999999999',
};

let stack: Stack;
let mailServer: MailServer;
let admin: Page;
let adminDevice: Authenticator;

/** Two withdrawals of 2 ETH, each needing one approval (auto-approve up to 1 ETH, four eyes from 5). */
async function provisionGamma(db: Database): Promise<void> {
  const { tenantId } = await createTenant(db, {
    name: GAMMA.name,
    slug: GAMMA.slug,
    mfaFreshSeconds: GAMMA.freshSeconds,
  });
  const passwordHash = await hashPassword(PASSWORD);
  await creditAsOperator(db, {
    tenantId,
    deposit: {
      reference: 'gamma-seed',
      accountId: 'cust-1',
      asset: 'ETH',
      amountMinor: (100n * ETH).toString(),
    },
    idempotencyKey: 'gamma-seed',
    actor: 'test',
  });
  await provisionRiskPolicy(db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: ETH.toString(),
    fourEyesMinMinor: (5n * ETH).toString(),
    actor: 'test',
  });
  await withTenant(db, tenantId, async (tx) => {
    await createStaffUser(tx, { tenantId, email: GAMMA.admin, role: 'admin', passwordHash });
    for (const [name, destination] of Object.entries(destinations)) {
      const { operation } = await createWithdrawal(tx, {
        tenantId,
        request: {
          withdrawalId: `gamma-${name}`,
          accountId: 'cust-1',
          asset: 'ETH',
          destination,
          amountMinor: (2n * ETH).toString(),
        },
        idempotencyKey: `withdrawal-gamma-${name}`,
      });
      const reviewed = await reviewWithdrawal(tx, operation);
      if (reviewed.approvalsRequired !== 1)
        throw new Error(`fixture needs 1 approval, has ${reviewed.approvalsRequired}`);
    }
  });
}

/**
 * An authenticator app for one secret. The server accepts the previous, current and next 30-second
 * step, never one at or before the last it accepted: each code is for the step after the last one
 * handed out.
 */
interface Authenticator {
  next(): Promise<string>;
}
function authenticator(secret: string): Authenticator {
  let lastStep = Math.floor(Date.now() / 30_000) - 2;
  return {
    async next() {
      const nowStep = Math.floor(Date.now() / 30_000);
      const step = Math.max(lastStep + 1, nowStep - 1);
      if (step > nowStep + 1) throw new Error('test authenticator: no unused step left in the window');
      lastStep = step;
      return generate({ secret, epoch: step * 30 + 15 });
    },
  };
}

/** Enrols from the QR code's otpauth URL; checks the secret shown beside it and the ten recovery codes. */
async function enrol(page: Page, name: string): Promise<Authenticator> {
  await page.getByRole('heading', { name: 'Set up your authenticator' }).waitFor();
  const qr = page.getByTestId('mfa-qr');
  await qr.waitFor();
  expect(await qr.getAttribute('src')).toMatch(/^data:image\/png;base64,/);
  const otpauth = new URL((await qr.getAttribute('data-otpauth')) ?? '');
  expect(otpauth.protocol).toBe('otpauth:');
  const secret = otpauth.searchParams.get('secret') ?? '';
  expect(await page.getByTestId('mfa-secret').textContent()).toBe(secret);
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, `${name}-mfa-enrol`);
  const device = authenticator(secret);
  await page.getByLabel('Code from your authenticator').fill(await device.next());
  await page.getByRole('button', { name: 'Confirm' }).click();
  const codes = page.getByTestId('recovery-codes');
  await codes.waitFor();
  expect(await codes.getByRole('listitem').count()).toBe(10);
  expect(await seriousViolations(page)).toEqual([]);
  await page.getByRole('button', { name: 'I have saved them, continue' }).click();
  await page.getByTestId('signed-in-as').waitFor();
  return device;
}

/** Clicks, and answers the step-up prompt with a fresh code if the server asks for one. */
async function withStepUp(page: Page, device: Authenticator, click: () => Promise<void>, done: Locator) {
  await click();
  const stepUp = page.getByTestId('step-up');
  await Promise.race([done.waitFor(), stepUp.waitFor()]);
  if (await stepUp.isVisible()) {
    await stepUp.getByLabel('Code from your authenticator').fill(await device.next());
    await stepUp.getByRole('button', { name: 'Verify and continue' }).click();
  }
  await done.waitFor();
}

beforeAll(async () => {
  mailServer = await startMailServer();
  stack = await startStack({
    provisionMore: provisionGamma,
    mail: mailServer,
    serverEnv: { IDEM_MFA_FRESH_SECONDS_MAX: String(STEP_UP_SECONDS) },
  });
});

afterAll(async () => {
  await stack?.stop();
  await mailServer?.close();
});

describe('staff sign-in with TOTP and the team screen', () => {
  it('I14-MFA an admin signs in by organisation, enrols with the QR code, and approves after a step-up code', async () => {
    admin = await newPage(stack);
    await admin.goto(`/staff/login?org=${GAMMA.slug}`);
    expect(await admin.getByLabel('Organisation').inputValue()).toBe(GAMMA.slug);
    expect(await seriousViolations(admin)).toEqual([]);
    await admin.getByLabel('E-mail').fill(GAMMA.admin);
    await admin.getByLabel('Password').and(admin.locator('input')).fill(PASSWORD);
    await admin.getByRole('button', { name: 'Sign in' }).click();
    adminDevice = await enrol(admin, 'staff-admin');

    // Outwait the server's step-up window: the code of the enrolment is no longer fresh. (Fixed: the
    // window runs on the server's clock against a row of its embedded database, out of the test's reach.)
    await admin.waitForTimeout((STEP_UP_SECONDS + 1) * 1000);
    await admin.goto('/staff/approvals');
    const card = admin.getByTestId('approval-card').filter({ hasText: destinations.byAdmin });
    await card.waitFor();
    await card.getByTestId('approve').click();
    const stepUp = admin.getByTestId('step-up');
    await stepUp.waitFor();
    // The prompt fades in: axe measures contrast only once its CSS transitions have ended (the
    // approve button's spinner behind it runs on, so only transitions are waited for).
    await admin.waitForFunction(() =>
      document
        .getAnimations()
        .filter((animation) => animation.constructor.name === 'CSSTransition')
        .every((animation) => animation.playState !== 'running'),
    );
    expect(await seriousViolations(admin)).toEqual([]);
    await screenshot(admin, 'staff-step-up');
    await stepUp.getByLabel('Code from your authenticator').fill(await adminDevice.next());
    await stepUp.getByRole('button', { name: 'Verify and continue' }).click();
    await expect
      .poll(() =>
        admin
          .getByTestId('decision-result')
          .textContent()
          .catch(() => ''),
      )
      .toContain('1 of 1 approvals; the withdrawal is APPROVED');
  }, 120_000);

  it('I14-TEAM I31-INVITE an admin invites an approver, who accepts from the e-mail link, sets a password and enrols; their approval waits out the cooling-off period the Team screen shows', async () => {
    await admin.goto('/staff/team');
    await admin.getByTestId('team-table').waitFor();
    expect(await seriousViolations(admin)).toEqual([]);
    await admin.getByLabel('E-mail').fill(GAMMA.approver);
    const sent = admin.getByTestId('invitation-sent');
    await withStepUp(admin, adminDevice, () => admin.getByRole('button', { name: 'Invite' }).click(), sent);
    expect(await sent.textContent()).toContain(GAMMA.approver);
    // The admin's screen never shows the link: it went to the invitee's mailbox only.
    expect(await admin.content()).not.toContain('/staff/invite');
    await screenshot(admin, 'staff-team-invited');

    const mail = await mailServer.waitFor(GAMMA.approver);
    const invitationUrl = mail.links.find((link) => link.includes('/staff/invite#')) ?? '';
    expect(invitationUrl.startsWith(`${stack.baseUrl}/staff/invite#`)).toBe(true);
    expect(await admin.content()).not.toContain(new URL(invitationUrl).hash.slice(1));

    const approver = await newPage(stack);
    await approver.goto(invitationUrl);
    await approver.getByRole('heading', { name: 'Join your team' }).waitFor();
    // The token leaves the address bar at once.
    expect(new URL(approver.url()).hash).toBe('');
    expect(await seriousViolations(approver)).toEqual([]);
    await approver.getByLabel('New password').and(approver.locator('input')).fill(PASSWORD);
    await approver.getByLabel('Repeat the password').and(approver.locator('input')).fill(PASSWORD);
    await approver.getByRole('button', { name: 'Set password and sign in' }).click();
    const approverDevice = await enrol(approver, 'staff-invited-approver');
    expect(await approver.getByTestId('signed-in-as').textContent()).toContain(
      `${GAMMA.approver} (approver)`,
    );

    // A new member cools off (24 hours by default): the approval is refused, saying from when.
    await approver.goto('/staff/approvals');
    const card = approver.getByTestId('approval-card').filter({ hasText: destinations.byApprover });
    await card.waitFor();
    // With the server's short step-up window the enrolment's code may be stale by now: then the
    // prompt asks for a fresh one first.
    await withStepUp(
      approver,
      approverDevice,
      () => card.getByTestId('approve').click(),
      card.getByText(/can approve from/),
    );
    await expect
      .poll(() => card.textContent().catch(() => ''), { timeout: 30_000 })
      .toContain('can approve from');
    await screenshot(approver, 'staff-approval-cooling-off');
    // Signing in again asks for the code after the password.
    await approver.getByRole('button', { name: 'Sign out' }).click();
    await approver.getByLabel('E-mail').waitFor();
    await approver.getByLabel('Organisation').fill(GAMMA.slug);
    await approver.getByLabel('E-mail').fill(GAMMA.approver);
    await approver.getByLabel('Password').and(approver.locator('input')).fill(PASSWORD);
    await approver.getByRole('button', { name: 'Sign in' }).click();
    await approver.getByRole('heading', { name: 'Enter your code' }).waitFor();
    expect(await seriousViolations(approver)).toEqual([]);
    await approver.getByLabel('Code from your authenticator').fill(await approverDevice.next());
    await approver.getByRole('button', { name: 'Verify' }).click();
    await approver.getByTestId('signed-in-as').waitFor();
    await approver.context().close();

    // The team list shows the new member active, with an authenticator set up.
    await admin.reload();
    const row = admin.locator(`[data-testid="team-member"][data-email="${GAMMA.approver}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('active');
    expect(await row.getByRole('cell').nth(3).textContent()).toBe('set up');
    const approvalsFrom = (await row.getByTestId('approvals-from').textContent()) ?? '';
    expect(approvalsFrom).toMatch(/^can approve from /);
    // About 24 hours from now, as the browser's locale writes it.
    const shown = await admin.evaluate(() => Date.now() + 24 * 3_600_000);
    expect(approvalsFrom).toContain(await admin.evaluate((at) => new Date(at).toLocaleDateString(), shown));
    expect(await seriousViolations(admin)).toEqual([]);
    await screenshot(admin, 'staff-team');
    await admin.context().close();
  }, 120_000);
});
