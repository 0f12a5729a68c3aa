import { readFileSync } from 'node:fs';
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
 * What an operator looks at first, in a real Chromium against the real server process:
 * the Overview (the landing page after sign-in) shows the seeded figures and reads again by itself
 * when a withdrawal is submitted; the Withdrawals explorer filters, pages, opens a withdrawal's page
 * and exports what the filter selects as CSV.
 */
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});

afterAll(async () => {
  await stack?.stop();
});

describe('I14-OVERVIEW the Overview screen', () => {
  it('I14-OVERVIEW lands after sign-in, shows the seeded figures, and refreshes by itself when a withdrawal arrives and when one is stopped', async () => {
    const page = await newPage(stack);
    await signInStaff(page, stack.a.tenantId, stack.a.staff.support.email);
    await page.waitForURL('**/staff/overview');
    const nav = page.getByRole('navigation', { name: 'Staff sections' }).getByRole('link');
    await expect(nav.first().textContent()).resolves.toBe('Overview');

    // Seeded: a BTC withdrawal of 50,000 sat left UNKNOWN, an ETH withdrawal of 0.5 ETH APPROVED.
    await page.getByTestId('open-UNKNOWN').waitFor();
    await expect(page.getByTestId('open-UNKNOWN').textContent()).resolves.toBe('UNKNOWN: 1');
    await expect(page.getByTestId('open-APPROVED').textContent()).resolves.toBe('APPROVED: 1');
    await expect(page.getByTestId('held-ETH').textContent()).resolves.toBe('0.5 ETH');
    await expect(page.getByTestId('held-BTC').textContent()).resolves.toBe('0.0005 BTC');
    const oldestUnknown = page.getByTestId('oldest-UNKNOWN').getByRole('link', { name: /stuck-/ });
    await expect(oldestUnknown.getAttribute('href')).resolves.toContain(stack.a.stuckOperationId);
    await expect(page.getByTestId('oldest-AWAITING_APPROVAL').textContent()).resolves.toContain('none');
    // No reconciliation run has read a chain: the screen says so rather than showing a balance.
    await expect(page.getByTestId('hot-ETH').textContent()).resolves.toMatch(
      /0\.5 ETH.*(Not observed|No hot wallet configured)/,
    );
    await expect(page.getByTestId('open-breaks').textContent()).resolves.toBe('0');
    await expect(page.getByTestId('dead-work-items').textContent()).resolves.toBe('0');
    await page.getByTestId('overview-hourly').locator('.recharts-surface').first().waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, 'staff-overview');

    // No worker runs: an API withdrawal stays REQUESTED. The page reads again without a reload.
    await stack.sdkA.withdrawals.submit(
      {
        withdrawalId: 'overview-refresh-1',
        accountId: 'cust-7',
        asset: 'ETH',
        destination: '0x8888888888888888888888888888888888888888',
        amountMinor: (2n * ETH).toString(),
      },
      'overview-refresh-key-1',
    );
    await page.getByTestId('open-REQUESTED').waitFor({ timeout: 30_000 });
    await expect(page.getByTestId('open-REQUESTED').textContent()).resolves.toBe('REQUESTED: 1');
    await expect(page.getByTestId('held-ETH').textContent()).resolves.toBe('2.5 ETH');
    await expect(
      page.getByTestId('oldest-AWAITING_APPROVAL').getByRole('link', { name: 'overview-refresh-1' }).count(),
    ).resolves.toBe(1);

    // A withdrawal changes state: an operator stops the APPROVED one on its page (another browser).
    const operator = await newPage(stack);
    await signInStaff(operator, stack.a.tenantId, stack.a.staff.operator.email);
    await operator.goto(`/staff/operations/${stack.a.approvedOperationId}`);
    await operator.getByLabel('Why stop it').fill('customer asked to cancel, ticket 14');
    await operator.getByRole('button', { name: 'Stop withdrawal' }).click();
    await operator.getByTestId('staff-timeline').getByText('APPROVED → REJECTED').waitFor();
    await operator.context().close();
    await page.getByTestId('open-APPROVED').waitFor({ state: 'detached', timeout: 30_000 });
    await expect(page.getByTestId('held-ETH').textContent()).resolves.toBe('2 ETH');
    await expect(page.getByTestId('hot-ETH').textContent()).resolves.toMatch(/^ETH \(ethereum\)0 ETH/);
    await page.context().close();
  });
});

describe('I14-EXPLORER the Withdrawals explorer', () => {
  const destination = '0x9999999999999999999999999999999999999999';

  beforeAll(async () => {
    // 27 withdrawals of account cust-7 (more than one page of 25), one of them to `destination`.
    for (let i = 0; i < 27; i += 1) {
      await stack.sdkA.withdrawals.submit(
        {
          withdrawalId: `explore-${String(i).padStart(2, '0')}`,
          accountId: 'cust-7',
          asset: 'ETH',
          destination: i === 13 ? destination : `0x${'a'.repeat(38)}${String(i).padStart(2, '0')}`,
          amountMinor: (BigInt(i + 1) * (ETH / 100n)).toString(),
        },
        `explore-key-${i}`,
      );
    }
  });

  it('I14-EXPLORER filters by exact destination and amount, pages by cursor, opens a withdrawal with its history, approvals and attempts', async () => {
    const page = await newPage(stack);
    await signInStaff(page, stack.a.tenantId, stack.a.staff.support.email);
    await page
      .getByRole('navigation', { name: 'Staff sections' })
      .getByRole('link', { name: 'Withdrawals' })
      .click();
    const table = page.getByTestId('explorer-table');
    await table.waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByLabel('Destination (exact)').fill(destination);
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForFunction(
      () => document.querySelectorAll('[data-testid="explorer-table"] tbody tr').length === 1,
    );
    await expect(table.locator('tbody tr').first().textContent()).resolves.toContain('explore-13');

    // Account and state, largest amount first: 25 on the first page, the rest on the next.
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByLabel('Account').fill('cust-7');
    await page.getByRole('combobox', { name: 'State' }).click();
    await page.getByRole('option', { name: 'REQUESTED', exact: true }).click();
    await page.getByRole('combobox', { name: 'Sort' }).click();
    await page.getByRole('option', { name: 'Largest amount first' }).click();
    await page.getByRole('button', { name: 'Filter' }).click();
    // The largest: the Overview test's 2 ETH withdrawal when it ran first, else explore-26.
    await page.waitForFunction(() =>
      /overview-refresh-1|explore-26/.test(
        document.querySelector('[data-testid="explorer-table"] tbody tr')?.textContent ?? '',
      ),
    );
    await expect(table.locator('tbody tr').count()).resolves.toBe(25);
    const first = await table.locator('tbody tr td:first-child').allTextContents();
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.waitForFunction(
      () =>
        document
          .querySelector('[data-testid="explorer-table"] tbody tr:last-child')
          ?.textContent?.includes('explore-00') === true,
    );
    const second = await table.locator('tbody tr td:first-child').allTextContents();
    expect(second.slice(-2)).toEqual(['explore-01', 'explore-00']);
    // Every withdrawal once across the two pages, none repeated.
    expect(new Set([...first, ...second]).size).toBe(first.length + second.length);
    expect([...first, ...second].filter((ref) => ref.startsWith('explore-'))).toHaveLength(27);
    await expect(page.getByRole('button', { name: 'Next page' }).isDisabled()).resolves.toBe(true);
    await screenshot(page, 'staff-withdrawals-explorer');

    // Amount range in display units (exact), one asset.
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByRole('combobox', { name: 'Asset' }).click();
    await page.getByRole('option', { name: 'ETH', exact: true }).click();
    await page.getByLabel('Amount from').fill('0.05');
    await page.getByLabel('Amount to').fill('0.07');
    await page.getByRole('combobox', { name: 'Sort' }).click();
    await page.getByRole('option', { name: 'Smallest amount first' }).click();
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForFunction(
      () => document.querySelectorAll('[data-testid="explorer-table"] tbody tr').length === 3,
    );
    expect(await table.locator('tbody tr td:first-child').allTextContents()).toEqual([
      'explore-04',
      'explore-05',
      'explore-06',
    ]);

    // A row opens the withdrawal's page: history, approval decisions, attempts.
    await table.getByRole('link', { name: 'explore-05' }).click();
    await page.waitForURL('**/staff/operations/**');
    await page.getByTestId('staff-timeline').waitFor();
    await expect(page.getByTestId('staff-timeline').textContent()).resolves.toContain('new → REQUESTED');
    await page.getByTestId('approvals-none').waitFor();
    await page.getByTestId('attempts-none').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await page.context().close();
  });

  it('I14-EXPLORER exports what the filter selects as a CSV file, in exact minor units', async () => {
    const context = await stack.browser.newContext({ baseURL: stack.baseUrl, acceptDownloads: true });
    const page = await context.newPage();
    await signInStaff(page, stack.a.tenantId, stack.a.staff.support.email);
    await page.goto('/staff/withdrawals');
    await page.getByTestId('explorer-table').waitFor();
    await page.getByLabel('Account').fill('cust-7');
    await page.getByRole('combobox', { name: 'Sort' }).click();
    await page.getByRole('option', { name: 'Smallest amount first' }).click();
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForFunction(
      () =>
        document
          .querySelector('[data-testid="explorer-table"] tbody tr')
          ?.textContent?.includes('explore-00') === true,
    );
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export CSV' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe('idem-withdrawals.csv');
    const path = await download.path();
    const lines = readFileSync(path, 'utf8').trim().split('\n');
    expect(lines[0]?.split(',').slice(0, 8)).toEqual([
      'createdAt',
      'updatedAt',
      'operationId',
      'reference',
      'accountId',
      'asset',
      'network',
      'amountMinor',
    ]);
    const rows = lines.slice(1).map((line) => line.split(','));
    // Account cust-7: the 27 explorer withdrawals and the Overview test's one.
    expect(rows.map((row) => row[3])).toContain('explore-13');
    expect(rows.every((row) => row[4] === 'cust-7')).toBe(true);
    expect(rows[0]?.[3]).toBe('explore-00');
    expect(rows[0]?.[7]).toBe((ETH / 100n).toString());
    await expect(page.getByTestId('export-result').textContent()).resolves.toBe(
      `Exported ${rows.length} withdrawals.`,
    );
    await context.close();
  });
});
