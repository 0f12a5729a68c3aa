import { sql } from 'drizzle-orm';
import { withAppRole } from '../db/app-role.ts';
import type { Database, Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { SYSTEM_ACCOUNTS } from '../journal/post-entry.ts';

/** Withdrawals whose money may have left (or be leaving) custody while the ledger still holds it. */
export const IN_FLIGHT_WITHDRAWAL_STATES = ['BROADCAST', 'UNKNOWN', 'FAILED_TERMINAL'] as const;

/** One tenant's ledger figures for one asset, in minor units. */
export interface LedgerFigures {
  assetCode: string;
  network: string;
  contractAddress: string | null;
  liabilitiesAvailable: bigint;
  liabilitiesHeld: bigint;
  /** What the ledger says custody holds: minus the sum of '@custody' postings. */
  custodyControl: bigint;
  /** Gas paid, minus the sum of '@network_fees' postings (positive: an expense). */
  feeExpense: bigint;
  /** Withdrawals sent and not settled: the hold is still on the ledger, the money may be gone. */
  inFlightWithdrawals: bigint;
}

/**
 * The tenant's figures per asset, read under its own row-level security. Every asset of the
 * tenant is listed, even one with no postings yet (zeros), so an idle asset is compared too.
 */
export async function ledgerFigures(tx: Tx, tenantId: string): Promise<LedgerFigures[]> {
  const rows = rowsOf<{
    code: string;
    network: string;
    contract_address: string | null;
    available: string;
    held: string;
    custody: string;
    fees: string;
    in_flight: string;
  }>(
    await tx.execute(sql`
      select a.code, a.network, a.contract_address,
             coalesce((select sum(b.available) from balances b
                        where b.tenant_id = a.tenant_id and b.asset_code = a.code), 0)::text as available,
             coalesce((select sum(b.held) from balances b
                        where b.tenant_id = a.tenant_id and b.asset_code = a.code), 0)::text as held,
             coalesce((select -sum(p.amount) from postings p
                        where p.tenant_id = a.tenant_id and p.asset_code = a.code
                          and p.account = ${SYSTEM_ACCOUNTS.custody}), 0)::text as custody,
             coalesce((select -sum(p.amount) from postings p
                        where p.tenant_id = a.tenant_id and p.asset_code = a.code
                          and p.account = ${SYSTEM_ACCOUNTS.networkFees}), 0)::text as fees,
             coalesce((select sum(o.amount_minor) from operations o
                        where o.tenant_id = a.tenant_id and o.asset_code = a.code and o.kind = 'withdrawal'
                          and o.state in (${sql.join(
                            IN_FLIGHT_WITHDRAWAL_STATES.map((state) => sql`${state}`),
                            sql`, `,
                          )})), 0)::text as in_flight
        from assets a
       where a.tenant_id = ${tenantId}::uuid
       order by a.code`),
  );
  return rows.map((row) => ({
    assetCode: row.code,
    network: row.network,
    contractAddress: row.contract_address,
    liabilitiesAvailable: BigInt(row.available),
    liabilitiesHeld: BigInt(row.held),
    custodyControl: BigInt(row.custody),
    feeExpense: BigInt(row.fees),
    inFlightWithdrawals: BigInt(row.in_flight),
  }));
}

/** The sum over every tenant of one custodian account, per asset: nothing of any single tenant. */
export interface CustodianAccountLedger {
  assetCode: string;
  available: bigint;
  held: bigint;
  custodyControl: bigint;
  tenants: number;
}

/**
 * Reads the ledgers of all tenants that share a custodian account as per-asset sums, through the
 * SECURITY DEFINER function `idem_custodian_account_ledger` (core/sql/idem_custodian_account_ledger.sql):
 * the caller runs as the application role with no tenant bound and never sees a tenant's row.
 */
export async function custodianAccountLedger(
  db: Database,
  account: string,
  custodianNetworks: readonly string[],
): Promise<CustodianAccountLedger[]> {
  return withAppRole(db, async (tx) => {
    const rows = rowsOf<{
      asset_code: string;
      available: string;
      held: string;
      custody_control: string;
      tenants: number;
    }>(
      await tx.execute(
        sql`select asset_code, available::text, held::text, custody_control::text, tenants
              from idem_custodian_account_ledger(${account}, ${`{${custodianNetworks.join(',')}}`}::text[])`,
      ),
    );
    return rows.map((row) => ({
      assetCode: row.asset_code,
      available: BigInt(row.available),
      held: BigInt(row.held),
      custodyControl: BigInt(row.custody_control),
      tenants: Number(row.tenants),
    }));
  });
}

/** Every tenant id, idle or not (the scheduler's function returns ids only). */
export async function allTenantIds(db: Database): Promise<string[]> {
  return withAppRole(db, async (tx) => {
    return rowsOf<{ tenant_id: string }>(
      await tx.execute(sql`select tenant_id::text from idem_all_tenants()`),
    ).map((row) => row.tenant_id);
  });
}

/** The custodian account a tenant's custodian-routed assets are held in. */
export async function custodianAccountOf(tx: Tx, tenantId: string): Promise<string> {
  const [row] = rowsOf<{ custodian_account: string }>(
    await tx.execute(sql`select custodian_account from tenants where tenant_id = ${tenantId}::uuid`),
  );
  if (!row) throw new Error('custodianAccountOf: tenant not visible in its own scope');
  return row.custodian_account;
}
