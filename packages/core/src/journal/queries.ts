import { sql } from 'drizzle-orm';
import type { Executor } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { SYSTEM_ACCOUNTS } from './post-entry.ts';

/**
 * The journal's reads that other packages need (reconciliation), kept here so that only core
 * knows how entries, postings and balances are laid out. Each runs inside the caller's tenant
 * transaction (withTenant), so row-level security scopes it.
 */

/**
 * The network fee each operation has expensed, net of reversals (positive: an expense), keyed by
 * operation id; an operation that has posted no fee is absent.
 */
export async function networkFeesExpensed(
  tx: Executor,
  tenantId: string,
  operationIds: readonly string[],
): Promise<Map<string, bigint>> {
  if (operationIds.length === 0) return new Map();
  const ids = `{${operationIds.join(',')}}`;
  const rows = rowsOf<{ operation_id: string; expensed: string }>(
    await tx.execute(sql`
      select e.operation_id::text, (-sum(p.amount))::text as expensed
        from journal_entries e
        join postings p on p.tenant_id = e.tenant_id and p.entry_id = e.entry_id
       where e.tenant_id = ${tenantId}::uuid and e.operation_id = any(${ids}::uuid[])
         and p.account = ${SYSTEM_ACCOUNTS.networkFees}
       group by e.operation_id`),
  );
  return new Map(rows.map((row) => [row.operation_id, BigInt(row.expensed)]));
}

/**
 * Balances whose available or held amount differs from the sum of their postings (control-bucket
 * postings excluded), at most `limit` of them. The ledger's own invariant: this is always empty
 * unless something wrote a balance around postEntry.
 */
export async function balancesDifferingFromPostings(
  tx: Executor,
  limit = 100,
): Promise<{ accountRef: string; assetCode: string }[]> {
  const rows = rowsOf<{ account_ref: string; asset_code: string }>(
    await tx.execute(sql`
      select b.account_ref, b.asset_code from balances b
        left join (select account, asset_code,
                          sum(amount) filter (where bucket = 'available') as available,
                          sum(amount) filter (where bucket = 'held') as held
                     from postings where bucket <> 'control' group by account, asset_code) p
          on p.account = b.account_ref and p.asset_code = b.asset_code
       where b.available <> coalesce(p.available, 0) or b.held <> coalesce(p.held, 0)
       limit ${limit}`),
  );
  return rows.map((row) => ({ accountRef: row.account_ref, assetCode: row.asset_code }));
}
