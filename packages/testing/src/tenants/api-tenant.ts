import { randomBytes } from 'node:crypto';
import { ALL_API_KEY_SCOPES, createApiKey, createTenant, creditAsOperator, type Database } from '@idem/core';
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
    await creditAsOperator(db, {
      tenantId,
      deposit: { reference, ...deposit },
      idempotencyKey: `deposit-${reference}`,
      actor: 'test',
    });
  }
  // Every scope: the suites that use this tenant drive every API call; I31-KEYS mints its own
  // narrower keys.
  const { apiKey, keyId } = await createApiKey(db, tenantId, {
    label: 'fixture',
    scopes: ALL_API_KEY_SCOPES,
    createdBy: 'test:fixture',
  });
  return { tenantId, apiKey, keyId };
}
