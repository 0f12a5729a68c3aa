import {
  createWithdrawal,
  type Database,
  reviewWithdrawal,
  setTenantGovernance,
  withTenant,
} from '@idem/core';
import type { CDPSession, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DESKTOP,
  ETH,
  type Stack,
  screenshot,
  seriousViolations,
  signInStaff,
  startStack,
} from './support/stack.ts';

/**
 * Passkeys for approvals (I32-PASSKEY), in a real Chromium with its virtual authenticator (the
 * CDP WebAuthn domain: a CTAP2 platform authenticator that verifies its user) against the real
 * server with a worker in its process: an approver registers a passkey, which waits for the admin's
 * approval; once the governance step applies it (and the admin requires passkeys for every approval),
 * the approver approves a withdrawal with it, and the decision is recorded as signed with the passkey. WebAuthn needs a host name as its RP ID, so
 * these pages open the server as localhost rather than 127.0.0.1. In tenant B (I32-TRUST) the
 * lone admin's first passkey is the trust anchor, and the admin approves another member's passkey
 * with it: the proposal decision is signed too.
 */
let stack: Stack;
let withdrawalId = '';

/** Tenant A's changes apply without delay; one ETH withdrawal of 2 ETH waits for one person. */
async function provision(db: Database, { a }: { a: Stack['a'] }): Promise<void> {
  await setTenantGovernance(db, { tenantId: a.tenantId, looseningDelaySeconds: 0 });
  const operation = await withTenant(db, a.tenantId, async (tx) => {
    const { operation } = await createWithdrawal(tx, {
      tenantId: a.tenantId,
      request: {
        withdrawalId: `passkey-${a.tenantId}`,
        accountId: 'cust-7',
        asset: 'ETH',
        destination: '0x5555555555555555555555555555555555555555',
        amountMinor: (2n * ETH).toString(),
      },
      idempotencyKey: `withdrawal-passkey-${a.tenantId}`,
    });
    return reviewWithdrawal(tx, operation);
  });
  if (operation.state !== 'REQUESTED' || operation.approvalsRequired !== 1) {
    throw new Error(`fixture withdrawal is ${operation.state} needing ${operation.approvalsRequired}`);
  }
  withdrawalId = operation.operationId;
}

beforeAll(async () => {
  stack = await startStack({
    provisionMore: provision,
    serverEnv: { IDEM_WORKER_IN_PROCESS: 'true', IDEM_GOVERNANCE_EVERY_MS: '1000' },
  });
});

afterAll(async () => {
  await stack?.stop();
});

/** A page on http://localhost:<port>, with Chromium's virtual authenticator attached. */
async function pageWithAuthenticator(): Promise<{ page: Page; cdp: CDPSession; authenticatorId: string }> {
  const context = await stack.browser.newContext({
    viewport: DESKTOP,
    baseURL: stack.baseUrl.replace('127.0.0.1', 'localhost'),
  });
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return { page, cdp, authenticatorId };
}

describe('I32-PASSKEY approvals only the approver’s device can make', () => {
  let approver: Awaited<ReturnType<typeof pageWithAuthenticator>>;

  it('I32-PASSKEY an approver registers a passkey on the Passkeys screen; it waits for the admin’s approval and is active once the change applies', async () => {
    approver = await pageWithAuthenticator();
    const { page } = approver;
    await signInStaff(page, stack.a.tenantId, stack.a.staff.approver1.email);
    await page.goto('/staff/passkeys');
    await page.getByRole('heading', { name: 'Passkeys' }).waitFor();
    await page.getByLabel('Passkey name').fill('work laptop');
    await page.getByTestId('passkey-register').click();
    const proposed = page.getByTestId('passkey-proposed');
    await proposed.waitFor();
    expect(await proposed.textContent()).toContain('sent to the other admins for approval');
    const proposalId = (await proposed.getAttribute('data-proposal-id')) ?? '';
    expect(proposalId).toMatch(/^[0-9a-f-]{36}$/);
    const row = page.locator('[data-testid="passkey-row"][data-label="work laptop"]');
    expect(await row.getByTestId('passkey-status').textContent()).toBe('awaiting approval');
    // The credential lives in this browser's authenticator only.
    const { credentials } = await approver.cdp.send('WebAuthn.getCredentials', {
      authenticatorId: approver.authenticatorId,
    });
    expect(credentials).toHaveLength(1);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, 'staff-passkey-proposed');

    // The tenant's admin approves it where proposals are decided; the worker's governance step applies it.
    const admin = await pageWithAuthenticator();
    await signInStaff(admin.page, stack.a.tenantId, stack.a.staff.admin.email);
    await admin.page.goto(`/staff/proposals/${proposalId}`);
    const card = admin.page.getByTestId('proposal-card');
    await card.waitFor();
    expect(await card.textContent()).toContain('work laptop');
    await card.getByTestId('proposal-approve').click();
    // The decision is recorded before the page reloads: a reload would cancel the request in flight.
    await admin.page.getByTestId('proposal-decision-result').waitFor();
    await expect
      .poll(
        async () => {
          await admin.page.reload();
          return admin.page
            .getByTestId('proposal-state')
            .textContent()
            .catch(() => '');
        },
        { timeout: 60_000, interval: 1_000 },
      )
      .toContain('EXECUTED');
    // The admin makes a passkey required for every approval in the tenant: a tightening, at once.
    await admin.page.goto('/staff/passkeys');
    const requirement = admin.page.getByTestId('passkey-requirement');
    await requirement.waitFor();
    expect(await requirement.getAttribute('data-required')).toBe('false');
    await admin.page.getByTestId('passkey-requirement-toggle').click();
    await admin.page.locator('[data-testid="passkey-requirement"][data-required="true"]').waitFor();
    expect(await seriousViolations(admin.page)).toEqual([]);
    await admin.page.context().close();

    await page.reload();
    await row.waitFor();
    expect(await row.getByTestId('passkey-status').textContent()).toBe('active');
  }, 120_000);

  it('I32-PASSKEY the approver approves a withdrawal with their passkey, which signs its payload hash, and the decision is recorded as signed with it', async () => {
    const { page, cdp, authenticatorId } = approver;
    await page.goto('/staff/approvals');
    const card = page.locator(`[data-testid="approval-card"][data-reference="passkey-${stack.a.tenantId}"]`);
    await card.waitFor();
    const before = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials[0]?.signCount;
    await card.getByTestId('approve').click();
    const result = page.getByTestId('decision-result');
    await result.waitFor();
    expect(await result.textContent()).toContain('1 of 1 approvals; the withdrawal is APPROVED');
    // The authenticator signed once more: the approval's assertion.
    const after = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials[0]?.signCount;
    expect(after).toBeGreaterThan(before ?? 0);
    await page.goto(`/staff/operations/${withdrawalId}`);
    const signedWith = page.getByTestId('approval-signed-with');
    await signedWith.waitFor();
    expect(await signedWith.textContent()).toBe('passkey');
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, 'staff-passkey-approved');
    await page.context().close();
  }, 90_000);
});

describe('I32-TRUST proposal decisions signed with the decider’s passkey', () => {
  it('I32-TRUST an admin with a passkey approves another member’s passkey on the proposal screen: their device signs the proposal’s hash and the decision is recorded as signed', async () => {
    // Tenant B's one admin registers the tenant's first passkey: the trust anchor, active at once.
    const admin = await pageWithAuthenticator();
    await signInStaff(admin.page, stack.b.tenantId, stack.b.staff.admin.email);
    await admin.page.goto('/staff/passkeys');
    await admin.page.getByLabel('Passkey name').fill('admin key');
    await admin.page.getByTestId('passkey-register').click();
    await admin.page.getByTestId('passkey-active').waitFor();

    // An approver registers theirs: a passkey_register change waiting for the admin.
    const approver = await pageWithAuthenticator();
    await signInStaff(approver.page, stack.b.tenantId, stack.b.staff.approver1.email);
    await approver.page.goto('/staff/passkeys');
    await approver.page.getByLabel('Passkey name').fill('approver key');
    await approver.page.getByTestId('passkey-register').click();
    const proposed = approver.page.getByTestId('passkey-proposed');
    await proposed.waitFor();
    const proposalId = (await proposed.getAttribute('data-proposal-id')) ?? '';
    expect(proposalId).toMatch(/^[0-9a-f-]{36}$/);
    await approver.page.context().close();

    const signCount = async () =>
      (await admin.cdp.send('WebAuthn.getCredentials', { authenticatorId: admin.authenticatorId }))
        .credentials[0]?.signCount ?? 0;
    const before = await signCount();
    await admin.page.goto(`/staff/proposals/${proposalId}`);
    const card = admin.page.getByTestId('proposal-card');
    await card.waitFor();
    expect(await card.textContent()).toContain('approver key');
    await card.getByTestId('proposal-approve').click();
    // Approved (its delay has not run yet), and the admin's authenticator signed once more: the
    // decision's assertion.
    await card.locator('[data-testid="proposal-state"]', { hasText: 'APPROVED' }).waitFor();
    expect(await signCount()).toBeGreaterThan(before);
    // The decision row keeps the assertion: the proposal shows it signed with a passkey.
    const decision = card.locator('[data-testid="proposal-decision"]');
    expect(await decision.getAttribute('data-signed-with')).toBe('passkey');
    expect(await decision.textContent()).toContain('signed with a passkey');
    expect(await seriousViolations(admin.page)).toEqual([]);
    await screenshot(admin.page, 'staff-proposal-signed');
    await admin.page.context().close();
  }, 90_000);
});
