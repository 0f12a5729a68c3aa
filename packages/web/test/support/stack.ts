import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StaffRole } from '@idem/contracts';
import {
  ALL_API_KEY_SCOPES,
  createApiKey,
  createStaffUser,
  createTenant,
  createWithdrawal,
  creditAsOperator,
  type Database,
  openDatabase,
  provisionHotWallet,
  reviewWithdrawal,
  setTenantGovernance,
  withTenant,
} from '@idem/core';
import { type AnvilInstance, generateWebhookSecret, startAnvil, startCustodianSimulator } from '@idem/rails';
import { createIdemClient, type IdemClient } from '@idem/sdk';
import { hashPassword } from '@idem/server';
import { bundle } from '@idem/server/bundle';
import { ETH, rpc } from '@idem/testing/chain';
import { migratedPgliteDataDir } from '@idem/testing/database';
import { startServerProcess } from '@idem/testing/server';
import { provisionRiskPolicy, strandWithdrawal } from '@idem/testing/tenants';
import { type Browser, chromium, type Page } from 'playwright-core';

export const resultsDir = fileURLToPath(new URL('../../test-results/', import.meta.url));

export { ETH };
export const PASSWORD = 'correct horse battery staple';

export interface StaffFixture {
  email: string;
  role: StaffRole;
  userId: string;
}

export interface TenantFixture {
  tenantId: string;
  apiKey: string;
  staff: Record<'admin' | 'approver1' | 'approver2' | 'support' | 'operator', StaffFixture>;
  /** A BTC withdrawal of account cust-9 left UNKNOWN that never reached the custodian (manual resolution). */
  stuckOperationId: string;
  /** An ETH withdrawal of account cust-8 approved by the review and never claimed (no worker runs): stop before signing. */
  approvedOperationId: string;
}

/**
 * Two tenants, each with an account funded with 100 ETH, ETH review rules (auto-approve up to
 * 1 ETH, four eyes from 5 ETH) and five staff members, written through core's ordinary paths.
 */
async function provision(db: Database, name: string): Promise<TenantFixture> {
  // Without TOTP, so every screen's test signs in with a password (staff-team.browser.test.ts covers MFA).
  const { tenantId } = await createTenant(db, { name, mfaRequired: false });
  const passwordHash = await hashPassword(PASSWORD);
  const staff = {} as TenantFixture['staff'];
  await creditAsOperator(db, {
    tenantId,
    deposit: {
      reference: `seed-${tenantId}`,
      accountId: 'cust-7',
      asset: 'ETH',
      amountMinor: (100n * ETH).toString(),
    },
    idempotencyKey: `seed-${tenantId}`,
    actor: 'test',
  });
  await provisionRiskPolicy(db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: ETH.toString(),
    fourEyesMinMinor: (5n * ETH).toString(),
    velocityMaxPerHour: 1000,
    similarWindowMinutes: 1,
    actor: 'test',
  });
  await withTenant(db, tenantId, async (tx) => {
    const members: [keyof TenantFixture['staff'], StaffRole][] = [
      ['admin', 'admin'],
      ['approver1', 'approver'],
      ['approver2', 'approver'],
      ['support', 'support'],
      ['operator', 'operator'],
    ];
    for (const [key, role] of members) {
      const email = `${key}@${name.toLowerCase().replaceAll(' ', '-')}.invalid`;
      const user = await createStaffUser(tx, { tenantId, email, role, passwordHash });
      staff[key] = { email, role, userId: user.userId };
    }
  });
  await creditAsOperator(db, {
    tenantId,
    deposit: {
      reference: `seed-btc-${tenantId}`,
      accountId: 'cust-9',
      asset: 'BTC',
      amountMinor: '100000000',
    },
    idempotencyKey: `seed-btc-${tenantId}`,
    actor: 'test',
  });
  const stuckOperationId = await withTenant(db, tenantId, async (tx) => {
    const { operation } = await createWithdrawal(tx, {
      tenantId,
      request: {
        withdrawalId: `stuck-${tenantId}`,
        accountId: 'cust-9',
        asset: 'BTC',
        destination: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq',
        amountMinor: '50000',
      },
      idempotencyKey: `withdrawal-stuck-${tenantId}`,
    });
    const stuck = await strandWithdrawal(tx, operation, 'UNKNOWN', { txHash: null });
    return stuck.operationId;
  });
  await creditAsOperator(db, {
    tenantId,
    deposit: {
      reference: `seed-8-${tenantId}`,
      accountId: 'cust-8',
      asset: 'ETH',
      amountMinor: ETH.toString(),
    },
    idempotencyKey: `seed-8-${tenantId}`,
    actor: 'test',
  });
  const approvedOperationId = await withTenant(db, tenantId, async (tx) => {
    const { operation } = await createWithdrawal(tx, {
      tenantId,
      request: {
        withdrawalId: `approved-${tenantId}`,
        accountId: 'cust-8',
        asset: 'ETH',
        destination: '0x7777777777777777777777777777777777777777',
        amountMinor: (ETH / 2n).toString(),
      },
      idempotencyKey: `withdrawal-approved-${tenantId}`,
    });
    const approved = await reviewWithdrawal(tx, operation);
    if (approved.state !== 'APPROVED') throw new Error(`fixture withdrawal is ${approved.state}`);
    return approved.operationId;
  });
  const { apiKey } = await createApiKey(db, tenantId, { scopes: ALL_API_KEY_SCOPES, createdBy: 'test' });
  return { tenantId, apiKey, staff, stuckOperationId, approvedOperationId };
}

export interface Stack {
  baseUrl: string;
  a: TenantFixture;
  b: TenantFixture;
  sdkA: IdemClient;
  sdkB: IdemClient;
  browser: Browser;
  output: string[];
  stop(): Promise<void>;
}

/**
 * The real server as a child process on a free port, on an embedded PGlite database provisioned
 * beforehand (one process at a time may open it), without chain or worker; and Debian's Chromium.
 */
export async function startStack(
  options: {
    /** Writes more into the database before the server opens it (one process at a time may). */
    provisionMore?: (db: Database, tenants: { a: TenantFixture; b: TenantFixture }) => Promise<void>;
    /** The SMTP server the server's mail sender sends through (@idem/testing/mail's startMailServer). */
    mail?: { url: string };
    /** More server settings (e.g. a worker in the process for the governance step). */
    serverEnv?: Record<string, string>;
  } = {},
): Promise<Stack> {
  // Already migrated (a copy of a template): initialising PGlite took ~15 s of every stack.
  const dataDir = await migratedPgliteDataDir('idem-web-');
  const handle = await openDatabase({ dataDir: join(dataDir, 'pgdata') });
  let a: TenantFixture;
  let b: TenantFixture;
  try {
    await handle.migrate();
    a = await provision(handle.db, 'Alpha Exchange');
    b = await provision(handle.db, 'Beta Exchange');
    await options.provisionMore?.(handle.db, { a, b });
  } finally {
    await handle.close();
  }
  // The custodian the server asks about withdrawals people resolve (nothing is ever submitted to it).
  const custodian = await startCustodianSimulator({ webhookSecret: generateWebhookSecret() });
  const server = await spawnServer(dataDir, {
    IDEM_EMBEDDED_RAILS: 'false',
    IDEM_WORKER_IN_PROCESS: 'false',
    IDEM_CUSTODIAN_URL: custodian.url,
    ...(options.mail ? { IDEM_SMTP_URL: options.mail.url, IDEM_MAIL_INTERVAL_MS: '200' } : {}),
    ...options.serverEnv,
  });
  const { baseUrl, output } = server;
  const browser = await launchBrowser();
  return {
    baseUrl,
    a,
    b,
    sdkA: createIdemClient({ baseUrl, apiKey: a.apiKey }),
    sdkB: createIdemClient({ baseUrl, apiKey: b.apiKey }),
    browser,
    output,
    stop: async () => {
      await browser.close();
      await server.stop();
      await custodian.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

interface SpawnedServer {
  baseUrl: string;
  output: string[];
  stop(): Promise<void>;
}

let serverBundle: Promise<string> | null = null;

/**
 * The real server as a child process on a free port, on the embedded database in `dataDir`: the
 * bundle `pnpm start` runs (built once per test process), started by @idem/testing/server as the
 * server's own tests start it.
 */
async function spawnServer(dataDir: string, env: Record<string, string>): Promise<SpawnedServer> {
  serverBundle ??= bundle('server');
  await serverBundle;
  const server = await startServerProcess({ LOG_LEVEL: 'warn', IDEM_DATA_DIR: dataDir, ...env });
  return { baseUrl: server.baseUrl, output: server.output, stop: server.stop };
}

export async function launchBrowser(): Promise<Browser> {
  mkdirSync(resultsDir, { recursive: true });
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

export const PHONE = { width: 390, height: 844 };
export const DESKTOP = { width: 1280, height: 900 };

export async function newPage(stack: Pick<Stack, 'browser' | 'baseUrl'>, viewport = DESKTOP): Promise<Page> {
  const context = await stack.browser.newContext({ viewport, baseURL: stack.baseUrl });
  return context.newPage();
}

/** Signs a staff member in through the sign-in screen. */
export async function signInStaff(page: Page, tenantId: string, email: string): Promise<void> {
  await page.goto(`/staff/login?tenant=${tenantId}`);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').and(page.locator('input')).fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('signed-in-as').waitFor();
}

/** Opens the customer screens the way a customer does: the operator's backend makes a one-time link. */
export async function openCustomer(page: Page, sdk: IdemClient, accountId = 'cust-7'): Promise<void> {
  const { url } = await sdk.customerSessions.create({ accountId });
  await page.goto(url);
  await page.getByTestId('balances').waitFor();
}

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/**
 * Runs axe-core in the page (evaluated through the DevTools protocol, so our CSP stays on) and
 * returns the serious and critical violations.
 */
export async function seriousViolations(
  page: Page,
): Promise<{ id: string; help: string; targets: string[] }[]> {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(): Promise<{ violations: unknown[] }> } }).axe;
    const result = await axe.run();
    return result.violations as {
      id: string;
      impact: string | null;
      help: string;
      nodes: { target: string[] }[];
    }[];
  });
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => ({
      id: violation.id,
      help: violation.help,
      targets: violation.nodes.map((node) => node.target.join(' ')),
    }));
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(resultsDir, `${name}.png`), fullPage: true });
}

/** A JSON-RPC call to the local chain (the test's own view of it, beside the server's worker). */
export const chainRpc = rpc;

export interface ChainStack {
  baseUrl: string;
  browser: Browser;
  anvil: AnvilInstance;
  tenantId: string;
  sdk: IdemClient;
  hotWallet: string;
  staff: Record<'operator' | 'approver1' | 'support' | 'admin', StaffFixture> & { admin2?: StaffFixture };
  output: string[];
  /** Mines `blocks` blocks now (the chain mines nothing on its own). */
  mine(blocks: number): Promise<void>;
  balanceOf(address: string): Promise<bigint>;
  /** The hot wallet's mined transaction count. */
  minedNonce(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * A second server process with a real chain and a real worker (the stuck-withdrawal staff screens): anvil
 * with mining off, so a broadcast transaction waits in the pool until the test mines a block; the
 * server's in-process worker signs, broadcasts, bumps and cancels; one tenant whose hot wallet is
 * anvil's development account 1. Alerts a BROADCAST after one second, so the queue's mark shows.
 */
export async function startChainStack(
  browser: Browser,
  options: {
    /** More credited deposits, beyond cust-7's 10 ETH (the customer's deposit history). */
    deposits?: { accountId: string; amountMinor: string }[];
    /**
     * A second admin (`staff.admin2`) and no loosening delay: the tenant is in quorum mode, so what
     * loosens (a new outbound endpoint) applies once the other admin approves and the worker runs.
     */
    secondAdmin?: boolean;
  } = {},
): Promise<ChainStack> {
  const anvil = await startAnvil({ mining: 'manual' });
  const dataDir = await migratedPgliteDataDir('idem-web-chain-');
  const accounts = (await chainRpc(anvil.rpcUrl, 'eth_accounts')) as string[];
  const hotWallet = accounts[1];
  if (!hotWallet) throw new Error('anvil has no development account 1');
  const nextNonce = Number(await chainRpc(anvil.rpcUrl, 'eth_getTransactionCount', [hotWallet, 'pending']));
  const handle = await openDatabase({ dataDir: join(dataDir, 'pgdata') });
  let tenantId: string;
  let apiKey: string;
  const staff = {} as ChainStack['staff'];
  try {
    await handle.migrate();
    // Two confirmations, so a test mines a few blocks rather than twelve per settlement.
    ({ tenantId } = await createTenant(handle.db, {
      name: 'Chain Exchange',
      mfaRequired: false,
      assets: [{ code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 2 }],
    }));
    const passwordHash = await hashPassword(PASSWORD);
    await provisionHotWallet(handle.db, {
      tenantId,
      network: 'ethereum',
      address: hotWallet,
      keyRef: 'dev:1',
      nextNonce,
    });
    await creditAsOperator(handle.db, {
      tenantId,
      deposit: {
        reference: 'seed-chain',
        accountId: 'cust-7',
        asset: 'ETH',
        amountMinor: (10n * ETH).toString(),
      },
      idempotencyKey: 'seed-chain',
      actor: 'test',
    });
    await provisionRiskPolicy(handle.db, {
      tenantId,
      assetCode: 'ETH',
      autoApproveMaxMinor: ETH.toString(),
      fourEyesMinMinor: (5n * ETH).toString(),
      velocityMaxPerHour: 1000,
      similarWindowMinutes: 1,
      actor: 'test',
    });
    await withTenant(handle.db, tenantId, async (tx) => {
      for (const [key, role] of [
        ['operator', 'operator'],
        ['approver1', 'approver'],
        ['support', 'support'],
        ['admin', 'admin'],
      ] as const) {
        const email = `${key}@chain-exchange.invalid`;
        const user = await createStaffUser(tx, { tenantId, email, role, passwordHash });
        staff[key] = { email, role, userId: user.userId };
      }
      if (options.secondAdmin) {
        const email = 'admin2@chain-exchange.invalid';
        const user = await createStaffUser(tx, { tenantId, email, role: 'admin', passwordHash });
        staff.admin2 = { email, role: 'admin', userId: user.userId };
      }
    });
    // One transaction each: a transaction's now() is one instant, and lists order by creation time.
    for (const [index, deposit] of (options.deposits ?? []).entries()) {
      await creditAsOperator(handle.db, {
        tenantId,
        deposit: { reference: `seed-chain-${index}`, asset: 'ETH', ...deposit },
        idempotencyKey: `seed-chain-${index}`,
        actor: 'test',
      });
    }
    ({ apiKey } = await createApiKey(handle.db, tenantId, { scopes: ALL_API_KEY_SCOPES, createdBy: 'test' }));
    if (options.secondAdmin) await setTenantGovernance(handle.db, { tenantId, looseningDelaySeconds: 0 });
  } finally {
    await handle.close();
  }
  const server = await spawnServer(dataDir, {
    IDEM_EMBEDDED_RAILS: 'false',
    IDEM_WORKER_IN_PROCESS: 'true',
    IDEM_WORKER_INTERVAL_MS: '200',
    IDEM_EVM_RPC_URL: anvil.rpcUrl,
    IDEM_EVM_CHAIN_ID: String(anvil.chainId),
    IDEM_BROADCAST_ALERT_AFTER_MS: 'ethereum=1000',
    IDEM_NOT_SENT_CONFIRM_INTERVAL_MS: '0',
    IDEM_RECONCILE_EVERY_MS: '0',
    // The tests' webhook receivers listen on 127.0.0.1: admitted as a deployment admits an internal one.
    IDEM_WEBHOOK_ALLOW_INTERNAL: '127.0.0.1',
    // With a second admin, an approved change applies within a second, not the default minute.
    ...(options.secondAdmin ? { IDEM_GOVERNANCE_EVERY_MS: '1000' } : {}),
  });
  return {
    baseUrl: server.baseUrl,
    browser,
    anvil,
    tenantId,
    sdk: createIdemClient({ baseUrl: server.baseUrl, apiKey }),
    hotWallet,
    staff,
    output: server.output,
    mine: async (blocks) => {
      await chainRpc(anvil.rpcUrl, 'anvil_mine', [`0x${blocks.toString(16)}`]);
    },
    balanceOf: async (address) =>
      BigInt((await chainRpc(anvil.rpcUrl, 'eth_getBalance', [address, 'latest'])) as string),
    minedNonce: async () =>
      Number(await chainRpc(anvil.rpcUrl, 'eth_getTransactionCount', [hotWallet, 'latest'])),
    stop: async () => {
      await server.stop();
      await anvil.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
