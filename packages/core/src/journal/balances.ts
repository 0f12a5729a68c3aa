import { and, eq } from 'drizzle-orm';
import type { Executor } from '../db/connect.ts';
import { balances } from '../db/schema/index.ts';

export interface BalanceView {
  asset: string;
  available: string;
  held: string;
}

/** An account's balances per asset, as projected from its postings. */
export async function getBalances(
  db: Executor,
  tenantId: string,
  accountRef: string,
): Promise<BalanceView[]> {
  const rows = await db
    .select({ asset: balances.assetCode, available: balances.available, held: balances.held })
    .from(balances)
    .where(and(eq(balances.tenantId, tenantId), eq(balances.accountRef, accountRef)))
    .orderBy(balances.assetCode);
  return rows;
}
