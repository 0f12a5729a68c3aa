import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  type ChainStack,
  DESKTOP,
  ETH,
  launchBrowser,
  newPage,
  openCustomer,
  PHONE,
  screenshot,
  seriousViolations,
  signInStaff,
  startChainStack,
} from './support/stack.ts';

/**
 * The customer screens in a real Chromium against the real server with a real chain (anvil,
 * mining by hand) and its worker: a 390 px phone where nothing is cut or overflows (I14-PHONE),
 * a detail and history that follow a withdrawal by themselves (I14-LIVE), the deposit history
 * (I14-DEPOSITS) and the second-device confirmation of seed 004 (I14-DEVICE).
 */
let browser: Browser;
let chain: ChainStack;
const TEMPLATE = 'https://explorer.example/tx/{txHash}';

beforeAll(async () => {
  browser = await launchBrowser();
  // cust-5 has 12 deposits: more than one page of the deposit history (10 a page).
  const deposits = Array.from({ length: 12 }, (_, index) => ({
    accountId: 'cust-5',
    amountMinor: (BigInt(index + 1) * (ETH / 100n)).toString(),
  }));
  chain = await startChainStack(browser, { deposits });
});

afterAll(async () => {
  await chain?.stop();
  await browser?.close();
});

async function waitForState(withdrawalId: string, state: string, timeoutMs = 30_000) {
  return vi.waitFor(
    async () => {
      const withdrawal = await chain.sdk.withdrawals.get(withdrawalId);
      if (withdrawal.state !== state) {
        throw new Error(`${withdrawalId} is ${withdrawal.state}, not ${state}:\n${chain.output.join('')}`);
      }
      return withdrawal;
    },
    { timeout: timeoutMs, interval: 200 },
  );
}

async function quiet(page: Page) {
  await page.waitForFunction(() => document.querySelector('[aria-label^="Loading"]') === null);
}

/** Fills the withdraw form and reviews it; leaves the page on the confirmation step. */
async function reviewWithdrawal(page: Page, destination: string, amount: string): Promise<void> {
  await page.getByLabel('Destination address').fill(destination);
  await page.getByLabel(/^Amount in/).fill(amount);
  await page.getByRole('button', { name: 'Review withdrawal' }).click();
  await page.getByTestId('confirmation').waitFor();
}

/**
 * Nothing of `element` is cut: its content fits its box (no hidden overflow, no ellipsis) and
 * its box lies within the 390 px viewport.
 */
async function expectFits(element: Locator, what: string) {
  const measured = await element.evaluate((node) => {
    const box = node.getBoundingClientRect();
    return {
      scrollWidth: node.scrollWidth,
      clientWidth: node.clientWidth,
      left: box.left,
      right: box.right,
      viewport: document.documentElement.clientWidth,
    };
  });
  expect(measured.scrollWidth, `${what} overflows its box`).toBeLessThanOrEqual(measured.clientWidth);
  expect(measured.left, `${what} starts left of the viewport`).toBeGreaterThanOrEqual(0);
  expect(measured.right, `${what} ends right of the viewport`).toBeLessThanOrEqual(measured.viewport);
}

async function expectPageFitsPhone(page: Page) {
  const widths = await page.evaluate(() => ({
    document: document.documentElement.scrollWidth,
    viewport: document.documentElement.clientWidth,
  }));
  expect(widths.document, 'the page scrolls sideways').toBeLessThanOrEqual(widths.viewport);
}

describe('customer screens on a phone', () => {
  it('I14-PHONE at 390x844 the history, deposits and detail show full status words, amounts and addresses within the viewport', async () => {
    // One withdrawal the worker broadcasts (long status), one stored REJECTED (longest status).
    const destination = '0xa1b2c3d4e5f60718293a4b5c6d7e8f9012345678';
    await chain.sdk.withdrawals.submit(
      {
        withdrawalId: 'phone-1',
        accountId: 'cust-7',
        asset: 'ETH',
        destination,
        amountMinor: '123456789012345678',
      },
      'key-phone-1',
    );
    await waitForState('phone-1', 'BROADCAST');
    // Stored REJECTED; the SDK reports it as the INSUFFICIENT_FUNDS refusal it is.
    await expect(
      chain.sdk.withdrawals.submit(
        {
          withdrawalId: 'phone-2',
          accountId: 'cust-7',
          asset: 'ETH',
          destination,
          amountMinor: (1000n * ETH).toString(),
        },
        'key-phone-2',
      ),
    ).rejects.toMatchObject({ code: 'INSUFFICIENT_FUNDS' });

    const page = await newPage(chain, PHONE);
    await openCustomer(page, chain.sdk);
    // The wallet: 18-decimal balances and the confirmation of a long address fit too.
    await quiet(page);
    await expectFits(page.getByTestId('available-ETH'), 'available balance');
    await expectFits(page.getByTestId('held-ETH'), 'held balance');
    await reviewWithdrawal(page, destination, '0.000000000000000001');
    await expectFits(page.getByTestId('confirm-destination'), 'destination to confirm');
    await expectFits(page.getByTestId('confirm-amount'), 'amount to confirm');
    await expectPageFitsPhone(page);
    await page.getByRole('button', { name: 'Change' }).click();
    await page.getByRole('link', { name: 'History' }).click();
    const rows = page.getByTestId('history-row');
    await rows.nth(1).waitFor();
    await quiet(page);
    const expected = [
      'Not sent: your available balance was too low; nothing was taken',
      'Sent; waiting for network confirmations',
    ];
    for (const [index, words] of expected.entries()) {
      const badge = rows.nth(index).getByTestId('status');
      await expect(badge.textContent()).resolves.toBe(words);
      await expectFits(badge, `status badge "${words}"`);
      await expectFits(rows.nth(index).getByTestId('amount'), `amount of row ${index}`);
      await expectFits(rows.nth(index), `history row ${index}`);
    }
    await expect(rows.nth(1).getByTestId('amount').textContent()).resolves.toBe('0.123456789012345678 ETH');
    await expectPageFitsPhone(page);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, 'customer-history-390');

    await rows
      .nth(1)
      .getByRole('link', { name: /Details/ })
      .click();
    await page.getByTestId('timeline').waitFor();
    await quiet(page);
    const address = page.getByTestId('detail-destination');
    await expect(address.textContent()).resolves.toBe(destination);
    await expectFits(address, 'destination address');
    await expectFits(page.getByTestId('detail-tx'), 'transaction hash');
    await expectFits(page.getByTestId('detail-state'), 'status');
    await expectFits(page.getByTestId('timeline'), 'timeline');
    await expectPageFitsPhone(page);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, 'customer-detail-390');
    await page.context().close();
  });
});

describe('a withdrawal followed live', () => {
  it('I14-LIVE an admin sets the explorer on the Branding screen; the open detail and history follow the withdrawal to "Confirmed (2 blocks)" without a reload, linked to the explorer', async () => {
    const admin = await newPage(chain);
    await signInStaff(admin, chain.tenantId, chain.staff.admin.email);
    await admin.getByRole('link', { name: 'Branding' }).click();
    const explorer = admin.getByLabel('Block explorer for ethereum');
    await explorer.fill('http://explorer.example/tx/{txHash}');
    await admin.getByRole('button', { name: 'Save explorer for ethereum' }).click();
    await admin.getByText('the template must be an https:// URL containing {txHash} once').waitFor();
    await explorer.fill(TEMPLATE);
    await admin.getByRole('button', { name: 'Save explorer for ethereum' }).click();
    await admin.getByText('Explorer for ethereum saved').waitFor();
    expect(await seriousViolations(admin)).toEqual([]);
    await admin.context().close();

    // Mining stays off until the pages are open: the withdrawal stops at BROADCAST.
    const { withdrawal } = await chain.sdk.withdrawals.submit(
      {
        withdrawalId: 'live-1',
        accountId: 'cust-7',
        asset: 'ETH',
        destination: '0xb2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2',
        amountMinor: (ETH / 5n).toString(),
      },
      'key-live-1',
    );
    const detail = await newPage(chain, PHONE);
    await openCustomer(detail, chain.sdk);
    await detail.goto(`/customer/withdrawals/${withdrawal.operationId}`);
    const history = await newPage(chain, PHONE);
    await openCustomer(history, chain.sdk);
    await history.getByRole('link', { name: 'History' }).click();
    const row = history
      .getByTestId('history-row')
      .filter({ has: history.locator(`a[href$="${withdrawal.operationId}"]`) });

    const timeline = detail.getByTestId('timeline');
    await timeline.getByText('Sent to the network').waitFor();
    await row.getByTestId('status').filter({ hasText: 'Sent; waiting for network confirmations' }).waitFor();
    const sent = await waitForState('live-1', 'BROADCAST');
    const link = detail.getByRole('link', { name: sent.txHash ?? 'no hash' });
    await expect(link.getAttribute('href')).resolves.toBe(TEMPLATE.replace('{txHash}', sent.txHash ?? ''));
    await screenshot(detail, 'customer-live-broadcast-390');

    await chain.mine(3);
    await timeline.getByText('Confirmed (2 blocks)').waitFor({ timeout: 30_000 });
    await expect(detail.getByTestId('detail-state').textContent()).resolves.toBe('Completed');
    await row.getByTestId('status').filter({ hasText: 'Completed' }).waitFor({ timeout: 30_000 });
    const steps = await timeline.locator('.mantine-Timeline-itemTitle').allTextContents();
    expect(steps).toEqual([
      'Requested',
      'Approved',
      'Being prepared',
      'Sent to the network',
      'Confirmed (2 blocks)',
    ]);
    expect(await seriousViolations(detail)).toEqual([]);
    await screenshot(detail, 'customer-live-confirmed-390');
    await detail.context().close();
    await history.context().close();
  });
});

describe('deposit history', () => {
  it('I14-DEPOSITS the history shows the account’s deposits in words beside its withdrawals, ten a page, older by cursor', async () => {
    const page = await newPage(chain, PHONE);
    await openCustomer(page, chain.sdk, 'cust-5');
    await page.getByRole('link', { name: 'History' }).click();
    const deposits = page.getByRole('region', { name: 'Deposit history' });
    const rows = deposits.getByTestId('deposit-row');
    await rows.nth(9).waitFor();
    await expect(rows.count()).resolves.toBe(10);
    await expect(rows.first().getByTestId('amount').textContent()).resolves.toBe('0.12 ETH');
    await expect(rows.first().getByTestId('status').textContent()).resolves.toBe('Received');
    await expectFits(rows.first(), 'deposit row');
    await expectPageFitsPhone(page);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, 'customer-deposits-390');
    await deposits.getByRole('button', { name: 'Older' }).click();
    await rows.filter({ hasText: '0.02 ETH' }).waitFor();
    await expect(rows.count()).resolves.toBe(2);
    await expect(page.getByRole('region', { name: 'Withdrawal history' }).textContent()).resolves.toContain(
      'No withdrawals yet',
    );
    await page.context().close();
  });
});

describe('a second device (seed 004)', () => {
  it('I14-DEVICE the laptop is shown the phone’s in-progress withdrawal (link, state, time) and must confirm to make another; nothing is merged', async () => {
    const destination = '0xc3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3';
    const phone = await newPage(chain, PHONE);
    await openCustomer(phone, chain.sdk);
    await reviewWithdrawal(phone, destination, '0.05');
    await phone.getByTestId('confirm-submit').click();
    await phone.getByTestId('outcome-created').waitFor();
    const mine = async () =>
      (await chain.sdk.withdrawals.list({ limit: 100 })).items.filter(
        (item) => item.destination === destination,
      );
    const [first] = await mine();
    if (!first) throw new Error('the phone created no withdrawal');

    const laptop = await newPage(chain, DESKTOP);
    await openCustomer(laptop, chain.sdk);
    await reviewWithdrawal(laptop, destination, '0.05');
    await laptop.getByTestId('confirm-submit').click();
    const warning = laptop.getByTestId('possible-duplicate');
    await warning.waitFor();
    await expect(warning.textContent()).resolves.toMatch(
      /already have a withdrawal of 0\.05 ETH to this address/,
    );
    const firstLink = warning.getByRole('link', { name: 'View the withdrawal in progress' });
    await expect(firstLink.getAttribute('href')).resolves.toBe(`/customer/withdrawals/${first.operationId}`);
    await expect(warning.getByTestId('duplicate-state').textContent()).resolves.not.toBe('');
    await expect(warning.getByTestId('duplicate-time').textContent()).resolves.toMatch(/\d{2}:\d{2}:\d{2}/);
    // Only the two answers are offered: no "Confirm withdrawal" that would resend unconfirmed.
    await expect(laptop.getByTestId('confirm-submit').count()).resolves.toBe(0);
    expect(await mine()).toHaveLength(1);
    expect(await seriousViolations(laptop)).toEqual([]);
    await screenshot(laptop, 'customer-second-device');

    await laptop.getByRole('button', { name: 'Yes, make a second withdrawal' }).click();
    await laptop.getByTestId('outcome-created').waitFor();
    const both = await mine();
    expect(both).toHaveLength(2);
    expect(new Set(both.map((item) => item.operationId)).size).toBe(2);
    await phone.context().close();
    await laptop.context().close();
  });
});
