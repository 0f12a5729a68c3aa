import { randomBytes } from 'node:crypto';
import type { StaffRole } from '@idem/contracts';
import {
  ALL_API_KEY_SCOPES,
  CUSTOMER_LINK_MS_DEFAULT,
  createApiKey,
  createCustomerLink,
  createStaffUser,
  createTenant,
  creditAsOperator,
  type Database,
  DEFAULT_ASSETS,
  provisionHotWallet,
  rowsOf,
  setRiskPolicyAsOperator,
  withTenant,
} from '@idem/core';
import { anvilDevPrivateKeys, deployTestToken } from '@idem/rails';
import { sql } from 'drizzle-orm';
import { createPublicClient, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { hashPassword } from './auth/password.ts';

export const DEMO_ACCOUNT = 'cust-7';
export const DEMO_TENANT_NAME = 'Demo Exchange';

/** Demo staff: an admin and two approvers, so four-eyes approval can be shown end to end. */
const DEMO_STAFF: { email: string; role: StaffRole }[] = [
  { email: 'admin@demo.invalid', role: 'admin' },
  { email: 'approver1@demo.invalid', role: 'approver' },
  { email: 'approver2@demo.invalid', role: 'approver' },
];

/** Opening balances of the demo account, in minor units: 2 BTC, 10 ETH, 10,000 USDC. */
const DEMO_DEPOSITS = [
  { asset: 'BTC', amountMinor: '200000000' },
  { asset: 'ETH', amountMinor: '10000000000000000000' },
  { asset: 'USDC', amountMinor: '10000000000' },
];

/** Demo risk rules: small withdrawals go straight through, large ones need one or two staff approvals. */
const DEMO_RISK = [
  { assetCode: 'BTC', autoApproveMaxMinor: '10000000', fourEyesMinMinor: '100000000' },
  { assetCode: 'ETH', autoApproveMaxMinor: '1000000000000000000', fourEyesMinMinor: '5000000000000000000' },
  { assetCode: 'USDC', autoApproveMaxMinor: '1000000000', fourEyesMinMinor: '5000000000' },
];

/** The demo hot wallet is anvil's development account 1: a public key pair, for local chains only. */
const DEMO_HOT_WALLET_KEY_REF = 'dev:1';

/**
 * On the first start of an embedded database: a demo tenant with funded balances and an API key,
 * so a new user can call the API at once. Deposits go through the ordinary deposit path (C24).
 * With a local chain, the tenant gets a hot wallet and a USDC token deployed on it, so its
 * withdrawals really settle. Returns null when the database already has a tenant.
 */
export async function seedDemoTenant(
  db: Database,
  options: { evm?: { rpcUrl: string; chainId: number } | undefined } = {},
): Promise<{
  tenantId: string;
  /** The organisation staff sign in with. */
  slug: string;
  apiKey: string;
  staff: { email: string; role: string; password: string }[];
} | null> {
  // Embedded PGlite connects as a superuser, so this count sees every tenant.
  const existing = rowsOf<{ n: number | string }>(await db.execute(sql`select count(*) as n from tenants`));
  if (Number(existing[0]?.n ?? 0) > 0) return null;
  const hotWalletKey = anvilDevPrivateKeys[1] as Hex;
  const usdcContract = options.evm
    ? await deployTestToken({
        rpcUrl: options.evm.rpcUrl,
        chainId: options.evm.chainId,
        privateKey: hotWalletKey,
        name: 'USD Coin (local)',
        symbol: 'USDC',
        decimals: 6,
        supplyMinor: 10n ** 15n,
      })
    : null;
  const assets = DEFAULT_ASSETS.map((asset) =>
    asset.code === 'USDC' && usdcContract ? { ...asset, contractAddress: usdcContract } : asset,
  );
  // The embedded demo signs in with passwords only: TOTP is a tenant setting, off here.
  const { tenantId, slug } = await createTenant(db, { name: DEMO_TENANT_NAME, assets, mfaRequired: false });
  // The demo is the deployment's own tool: it sets rules that auto-approve, and registers the
  // wallet, as the tables' owner (the application's role could do neither).
  for (const rule of DEMO_RISK)
    await setRiskPolicyAsOperator(db, { tenantId, ...rule, actor: 'system:demo' });
  if (options.evm) {
    // The wallet's nonces continue from the chain's count (the token deployment used nonce 0).
    const chain = createPublicClient({ transport: http(options.evm.rpcUrl) });
    const nextNonce = await chain.getTransactionCount({
      address: privateKeyToAccount(hotWalletKey).address,
      blockTag: 'pending',
    });
    await provisionHotWallet(db, {
      nextNonce,
      tenantId,
      network: 'ethereum',
      address: privateKeyToAccount(hotWalletKey).address,
      keyRef: DEMO_HOT_WALLET_KEY_REF,
    });
  }
  for (const deposit of DEMO_DEPOSITS) {
    const reference = `demo-opening-${deposit.asset.toLowerCase()}`;
    await creditAsOperator(db, {
      tenantId,
      deposit: { reference, accountId: DEMO_ACCOUNT, ...deposit },
      idempotencyKey: `deposit-${reference}`,
      actor: 'demo-seed',
    });
  }
  const { apiKey } = await createApiKey(db, tenantId, {
    label: 'demo',
    scopes: ALL_API_KEY_SCOPES,
    createdBy: 'demo-seed',
  });
  // Generated per database and shown once: no demo password is ever the same twice.
  const staff: { email: string; role: string; password: string }[] = [];
  for (const member of DEMO_STAFF) {
    const password = randomBytes(12).toString('base64url');
    const passwordHash = await hashPassword(password);
    await withTenant(db, tenantId, (tx) => createStaffUser(tx, { tenantId, ...member, passwordHash }));
    staff.push({ ...member, password });
  }
  return { tenantId, slug, apiKey, staff };
}

/**
 * A fresh one-time customer link for the demo account, printed on every embedded start (links are
 * single-use and short-lived). Null when this database has no demo tenant.
 */
export async function demoCustomerLink(
  db: Database,
  baseUrl: string,
): Promise<{ tenantId: string; slug: string | null; url: string } | null> {
  // Embedded PGlite connects as a superuser, so this lookup sees every tenant and the slug directory.
  const rows = rowsOf<{ tenant_id: string; slug: string | null }>(
    await db.execute(
      sql`select t.tenant_id, s.slug from tenants t left join tenant_slugs s on s.tenant_id = t.tenant_id
          where t.name = ${DEMO_TENANT_NAME} order by t.created_at limit 1`,
    ),
  );
  const tenantId = rows[0]?.tenant_id;
  if (!tenantId) return null;
  const link = await withTenant(db, tenantId, (tx) =>
    createCustomerLink(tx, { tenantId, accountRef: DEMO_ACCOUNT, ttlMs: CUSTOMER_LINK_MS_DEFAULT }),
  );
  return { tenantId, slug: rows[0]?.slug ?? null, url: `${baseUrl}/customer/start#${link.token}` };
}
