import {
  createApiKey,
  createTenant,
  type Database,
  DEFAULT_ASSETS,
  recordDeposit,
  registerHotWallet,
  rowsOf,
  setRiskPolicy,
  withTenant,
} from '@idem/core';
import { anvilDevPrivateKeys, deployTestToken } from '@idem/rails';
import { sql } from 'drizzle-orm';
import { createPublicClient, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

export const DEMO_ACCOUNT = 'cust-7';

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
): Promise<{ tenantId: string; apiKey: string } | null> {
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
  const { tenantId } = await createTenant(db, { name: 'Demo Exchange', assets });
  await withTenant(db, tenantId, async (tx) => {
    for (const rule of DEMO_RISK) await setRiskPolicy(tx, { tenantId, ...rule });
    if (options.evm) {
      // The wallet's nonces continue from the chain's count (the token deployment used nonce 0).
      const chain = createPublicClient({ transport: http(options.evm.rpcUrl) });
      const nextNonce = await chain.getTransactionCount({
        address: privateKeyToAccount(hotWalletKey).address,
        blockTag: 'pending',
      });
      await registerHotWallet(tx, {
        nextNonce,
        tenantId,
        network: 'ethereum',
        address: privateKeyToAccount(hotWalletKey).address,
        keyRef: DEMO_HOT_WALLET_KEY_REF,
      });
    }
  });
  for (const deposit of DEMO_DEPOSITS) {
    const reference = `demo-opening-${deposit.asset.toLowerCase()}`;
    await withTenant(db, tenantId, (tx) =>
      recordDeposit(tx, {
        tenantId,
        deposit: { reference, accountId: DEMO_ACCOUNT, ...deposit },
        idempotencyKey: `deposit-${reference}`,
        actor: 'demo-seed',
      }),
    );
  }
  const { apiKey } = await createApiKey(db, tenantId, { label: 'demo' });
  return { tenantId, apiKey };
}
