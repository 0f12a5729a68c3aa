import { createTenant, creditAsOperator, type Database, provisionHotWallet } from '@idem/core';
import { ETH } from '../chain/units.ts';
import { provisionRiskPolicy } from './risk.ts';

/**
 * The invariant tests' tenant: ETH on the local chain at `confirmations`, one hot wallet at
 * `hotWallet` (dev key 1), withdrawals up to 10 ETH auto-approved, and account `acct-1` funded with
 * 100 ETH. Returns the tenant's id.
 */
export async function provisionHotWalletTenant(
  db: Database,
  options: { name: string; hotWallet: string; confirmations: number },
): Promise<string> {
  const { tenantId } = await createTenant(db, {
    name: options.name,
    assets: [{ code: 'ETH', network: 'ethereum', decimals: 18, confirmations: options.confirmations }],
  });
  await provisionHotWallet(db, {
    tenantId,
    network: 'ethereum',
    address: options.hotWallet,
    keyRef: 'dev:1',
  });
  await creditAsOperator(db, {
    tenantId,
    deposit: { reference: 'seed', accountId: 'acct-1', asset: 'ETH', amountMinor: (100n * ETH).toString() },
    idempotencyKey: 'seed',
    actor: 'test',
  });
  await provisionRiskPolicy(db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: (10n * ETH).toString(),
    fourEyesMinMinor: (100n * ETH).toString(),
  });
  return tenantId;
}
