import { createApiKey, createTenant, type Database, recordDeposit, rowsOf, withTenant } from '@idem/core';
import { sql } from 'drizzle-orm';

export const DEMO_ACCOUNT = 'cust-7';

/** Opening balances of the demo account, in minor units: 2 BTC, 10 ETH, 10,000 USDC. */
const DEMO_DEPOSITS = [
  { asset: 'BTC', amountMinor: '200000000' },
  { asset: 'ETH', amountMinor: '10000000000000000000' },
  { asset: 'USDC', amountMinor: '10000000000' },
];

/**
 * On the first start of an embedded database: a demo tenant with funded balances and an API key,
 * so a new user can call the API at once. Deposits go through the ordinary deposit path (C24).
 * Returns null when the database already has a tenant.
 */
export async function seedDemoTenant(db: Database): Promise<{ tenantId: string; apiKey: string } | null> {
  // Embedded PGlite connects as a superuser, so this count sees every tenant.
  const existing = rowsOf<{ n: number | string }>(await db.execute(sql`select count(*) as n from tenants`));
  if (Number(existing[0]?.n ?? 0) > 0) return null;
  const { tenantId } = await createTenant(db, { name: 'Demo Exchange' });
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
