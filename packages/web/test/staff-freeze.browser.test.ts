import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ETH,
  newPage,
  type Stack,
  screenshot,
  seriousViolations,
  signInStaff,
  startStack,
} from './support/stack.ts';

/**
 * The freeze switch in a real Chromium against the real server process (docs/GOVERNANCE.md
 * "Freeze"): an operator freezes one account at once, the withdrawal it holds is shown as held by a
 * freeze, support sees the freeze but no switch, and the screen passes the accessibility check.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.stop();
});

async function openFreeze(page: Page): Promise<void> {
  await page.getByRole('link', { name: 'Freeze', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Freeze' }).waitFor();
  await page.waitForFunction(() => document.querySelector('[aria-label^="Loading"]') === null);
}

describe('I33-FREEZE the freeze switch', () => {
  it('I33-FREEZE an operator freezes an account at once; its withdrawal is shown held; support sees no switch', async () => {
    // No worker runs in this stack: the withdrawal stays REQUESTED, and the freeze holds it.
    await stack.sdkA.withdrawals.submit(
      {
        withdrawalId: 'freeze-held-1',
        accountId: 'cust-7',
        asset: 'ETH',
        destination: '0x7777777777777777777777777777777777777777',
        amountMinor: (ETH / 10n).toString(),
      },
      'freeze-held-key-1',
    );
    const page = await newPage(stack);
    await signInStaff(page, stack.a.tenantId, stack.a.staff.operator.email);
    await openFreeze(page);
    await page.getByTestId('freeze-status').getByText('Nothing is frozen').waitFor();
    await page.getByRole('combobox', { name: 'Scope' }).click();
    await page.getByRole('option', { name: 'One account' }).click();
    await page.getByRole('textbox', { name: 'Account' }).fill('cust-7');
    await page.getByRole('textbox', { name: 'Reason' }).fill('suspected account takeover');
    await page.getByRole('button', { name: 'Freeze now' }).click();
    await page.getByTestId('freeze-status').getByText('1 freeze(s) in force').waitFor();
    await page.getByTestId('freezes').getByText('account cust-7').waitFor();
    await page.getByTestId('freezes').getByText('suspected account takeover').waitFor();
    await page.getByTestId('held-withdrawals').getByText('REQUESTED, held by a freeze').waitFor();
    await expect(page.getByTestId('held-withdrawals').getByText('cust-7').count()).resolves.toBe(1);
    // An operator freezes but does not lift: no proposal button for them.
    await expect(page.getByRole('button', { name: 'Propose lift' }).count()).resolves.toBe(0);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, 'staff-freeze');
    await page.context().close();

    const support = await newPage(stack);
    await signInStaff(support, stack.a.tenantId, stack.a.staff.support.email);
    await openFreeze(support);
    await support.getByTestId('freezes').getByText('account cust-7').waitFor();
    await expect(support.getByRole('button', { name: 'Freeze now' }).count()).resolves.toBe(0);
    await support.context().close();
  });

  it('I33-TRIP an admin sets automatic trips at once; turning one off is not done at once; support sees them without the form', async () => {
    const page = await newPage(stack);
    await signInStaff(page, stack.a.tenantId, stack.a.staff.admin.email);
    await openFreeze(page);
    await page.getByText('No trips set.').waitFor();
    await page.getByRole('textbox', { name: 'Failures allowed' }).fill('3');
    await page.getByRole('textbox', { name: 'Within (seconds)' }).fill('600');
    await page.getByRole('textbox', { name: 'Outflow share allowed (%)' }).fill('50');
    await page.getByRole('button', { name: 'Set trips' }).click();
    await page.getByTestId('trip-outcome').getByText('Trips in force').waitFor();
    await page.getByTestId('trip-tenant').getByText('more than 3 within 600 s').waitFor();
    await page.getByTestId('trip-tenant').getByText('above 50% of custody').waitFor();
    // Turning the outflow trip off loosens it: this tenant has one admin, so it is refused, and
    // the trip stays as it was.
    await page.getByRole('textbox', { name: 'Outflow share allowed (%)' }).fill('');
    await page.getByRole('button', { name: 'Set trips' }).click();
    await page.getByText(/one admin loosens no control/).waitFor();
    await page.getByTestId('trip-tenant').getByText('above 50% of custody').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await page.context().close();

    const support = await newPage(stack);
    await signInStaff(support, stack.a.tenantId, stack.a.staff.support.email);
    await openFreeze(support);
    await support.getByTestId('trip-tenant').getByText('more than 3 within 600 s').waitFor();
    await expect(support.getByRole('button', { name: 'Set trips' }).count()).resolves.toBe(0);
    await support.context().close();
  });
});
