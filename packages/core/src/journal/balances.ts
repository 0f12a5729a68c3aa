import { and, eq, sql } from 'drizzle-orm';
import type { Executor } from '../db/connect.ts';
import { balances, postings } from '../db/schema/index.ts';

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

/** Sums postings per (account, bucket, asset): what the projection must equal. */
export async function sumPostings(db: Executor, tenantId: string) {
  return db
    .select({
      account: postings.account,
      bucket: postings.bucket,
      assetCode: postings.assetCode,
      total: sql<string>`sum(${postings.amount})::text`,
    })
    .from(postings)
    .where(eq(postings.tenantId, tenantId))
    .groupBy(postings.account, postings.bucket, postings.assetCode);
}
