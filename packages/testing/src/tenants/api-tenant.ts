import { randomBytes } from 'node:crypto';
import { createApiKey, createTenant, type Database, recordDeposit, withTenant } from '@idem/core';
import { ETH } from '../chain/units.ts';

export function uniqueId(prefix: string): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

export interface TenantFixture {
  tenantId: string;
  apiKey: string;
  keyId: string;
}

/** A tenant with an API key and a funded account, through core's ordinary paths. */
export async function provisionTenant(
  db: Database,
  options: { name?: string; fund?: { accountId: string; asset: string; amountMinor: string }[] } = {},
): Promise<TenantFixture> {
  const { tenantId } = await createTenant(db, {
    name: options.name ?? 'Contract Exchange',
    // Staff of these tenants sign in without TOTP; staff-team.test.ts covers MFA.
    mfaRequired: false,
  });
  for (const deposit of options.fund ?? [
    { accountId: 'cust-7', asset: 'ETH', amountMinor: (100n * ETH).toString() },
  ]) {
    const reference = uniqueId('dep');
    await withTenant(db, tenantId, (tx) =>
      recordDeposit(tx, {
        tenantId,
        deposit: { reference, ...deposit },
        idempotencyKey: `deposit-${reference}`,
        actor: 'test',
      }),
    );
  }
  const { apiKey, keyId } = await createApiKey(db, tenantId);
  return { tenantId, apiKey, keyId };
}
