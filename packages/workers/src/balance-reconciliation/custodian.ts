import { type Explanation, scrubbedError } from '@idem/contracts';
import {
  allTenantIds,
  custodianAccountLedger,
  custodianAccountOf,
  IN_FLIGHT_WITHDRAWAL_STATES,
  ledgerFigures,
  rowsOf,
  withTenant,
} from '@idem/core';
import type { AccountBalances } from '@idem/rails';
import { sql } from 'drizzle-orm';
import { routeFor } from '../rails.ts';
import type { BalanceContext, PlaceComparison } from './chain.ts';

/** The account name of the deployment's one custodian connection unless configured otherwise. */
export const DEFAULT_CUSTODIAN_ACCOUNT = 'omnibus';

/** The networks whose assets the custodian holds (every network the platform runs no node for). */
export const CUSTODIAN_NETWORKS = ['bitcoin'] as const;
/** At most this many unsettled custodian withdrawals per tenant are looked up per pass. */
const LOOKUPS_MAX = 500;

/**
 * One custodian account compared once for every tenant that holds assets in it (an omnibus
 * account): the one reported balance against the SUM of the member tenants' ledgers, which the
 * database returns as per-asset totals without any tenant's row. The in-flight items that explain
 * a difference are read per member, each under its own tenant's scope, by the worker.
 */
export interface CustodianAccountPass {
  account: string;
  members: string[];
  report: AccountBalances | null;
  unobservedReason?: string;
  /** Per asset: the account's expected figure, observed, members, and every explanation. */
  assets: Map<string, { expected: bigint; observed: bigint | null; tenants: number }>;
  /** Per member tenant, its own explaining items, each with its asset. */
  explanationsByTenant: Map<string, AssetExplanation[]>;
}

export interface AssetExplanation {
  assetCode: string;
  explanation: Explanation;
}

/**
 * The tenants of an account, found by asking each tenant's own scope which account it uses (no
 * cross-tenant read): the worker is the one party trusted to visit every tenant.
 */
async function membersOf(ctx: BalanceContext, account: string): Promise<string[]> {
  const members: string[] = [];
  for (const tenantId of await allTenantIds(ctx.db)) {
    const own = await withTenant(ctx.db, tenantId, (tx) => custodianAccountOf(tx, tenantId));
    if (own === account) members.push(tenantId);
  }
  return members;
}

export async function passCustodianAccount(
  ctx: BalanceContext,
  account: string,
): Promise<CustodianAccountPass> {
  const members = await membersOf(ctx, account);
  // Ledger first, then the report: a transfer completed before the report and not yet settled is
  // then found by its lookup (and counted only if the provider completed it by the report time).
  const sums = await custodianAccountLedger(ctx.db, account, CUSTODIAN_NETWORKS);
  const unsettled = new Map<string, { operationId: string; assetCode: string; amountMinor: string }[]>();
  for (const tenantId of members) {
    unsettled.set(tenantId, await unsettledCustodianWithdrawals(ctx, tenantId));
  }
  let report: AccountBalances | null = null;
  let unobservedReason: string | undefined;
  const connected = ctx.rails.config.custodianAccount ?? DEFAULT_CUSTODIAN_ACCOUNT;
  if (account !== connected) {
    unobservedReason = `this deployment's custodian connection is account '${connected}', not '${account}'`;
  } else {
    try {
      report = await ctx.rails.custodian().balances();
    } catch (error) {
      unobservedReason = `the custodian did not report balances: ${scrubbedError(error, 120)}`;
    }
  }
  const explanationsByTenant = new Map<string, AssetExplanation[]>();
  if (report) {
    const asOf = Date.parse(report.asOf);
    for (const [tenantId, withdrawals] of unsettled) {
      const explanations: AssetExplanation[] = [];
      for (const withdrawal of withdrawals) {
        const found = await ctx.rails.custodian().lookupByReference(withdrawal.operationId);
        if (found.found !== 'one') continue;
        const transfer = found.transfer;
        if (
          transfer.status === 'completed' &&
          Date.parse(transfer.updatedAt) <= asOf &&
          transfer.asset === withdrawal.assetCode
        ) {
          explanations.push({
            assetCode: withdrawal.assetCode,
            explanation: {
              kind: 'custodian_completed_not_settled',
              subject: `operation:${withdrawal.operationId}`,
              amountMinor: `-${transfer.amountMinor}`,
            },
          });
        }
      }
      for (const deposit of await depositsSeenNotCredited(ctx, tenantId, asOf)) {
        explanations.push({
          assetCode: deposit.asset,
          explanation: {
            kind: 'custodian_deposit_seen_not_credited',
            subject: `deposit:${deposit.reference}`,
            amountMinor: deposit.amountMinor,
          },
        });
      }
      explanationsByTenant.set(tenantId, explanations);
    }
  }
  const assets = new Map<string, { expected: bigint; observed: bigint | null; tenants: number }>();
  const reported = new Map((report?.data ?? []).map((row) => [row.asset, BigInt(row.amountMinor)]));
  for (const sum of sums) {
    assets.set(sum.assetCode, {
      expected: sum.custodyControl,
      observed: report ? (reported.get(sum.assetCode) ?? 0n) : null,
      tenants: sum.tenants,
    });
  }
  return {
    account,
    members,
    report,
    ...(unobservedReason ? { unobservedReason } : {}),
    assets,
    explanationsByTenant,
  };
}

/**
 * Custodian deposits the inbox holds but has not credited (received, or parked for a person), by
 * the report time: money the custodian already counts. A deposit reported twice (its webhook and
 * the poller's copy) counts once, by its reference.
 */
async function depositsSeenNotCredited(ctx: BalanceContext, tenantId: string, asOf: number) {
  const rows = await withTenant(ctx.db, tenantId, async (tx) =>
    rowsOf<{ reference: string; asset: string; amount_minor: string }>(
      await tx.execute(sql`
        select distinct on (body->'data'->>'reference')
               body->'data'->>'reference' as reference, body->'data'->>'asset' as asset,
               body->'data'->>'amountMinor' as amount_minor
          from inbox_events
         where tenant_id = ${tenantId}::uuid and event_type = 'deposit.confirmed'
           and status in ('RECEIVED', 'PARKED') and received_at <= ${new Date(asOf).toISOString()}::timestamptz
           and not exists (select 1 from operations o where o.tenant_id = inbox_events.tenant_id
                            and o.kind = 'deposit' and o.reference = inbox_events.body->'data'->>'reference')
         order by body->'data'->>'reference', received_at
         limit ${LOOKUPS_MAX}`),
    ),
  );
  return rows
    .filter((row) => /^[0-9]{1,78}$/.test(row.amount_minor ?? ''))
    .map((row) => ({
      reference: row.reference,
      asset: row.asset,
      amountMinor: row.amount_minor,
    }));
}

async function unsettledCustodianWithdrawals(ctx: BalanceContext, tenantId: string) {
  return withTenant(ctx.db, tenantId, async (tx) =>
    rowsOf<{ operation_id: string; asset_code: string; amount_minor: string; network: string }>(
      await tx.execute(sql`
        select operation_id::text, asset_code, amount_minor::text, network from operations
         where tenant_id = ${tenantId}::uuid and kind = 'withdrawal'
           and state in (${sql.join(
             ['SIGNED', ...IN_FLIGHT_WITHDRAWAL_STATES].map((state) => sql`${state}`),
             sql`, `,
           )})
         order by updated_at desc
         limit ${LOOKUPS_MAX}`),
    )
      .filter((row) => routeFor(row.network).kind === 'custodian')
      .map((row) => ({
        operationId: row.operation_id,
        assetCode: row.asset_code,
        amountMinor: row.amount_minor,
      })),
  );
}

/**
 * The tenant's rows of an account pass: its own ledger figures beside the account's comparison.
 * The explanations list the tenant's own items; the other members' items appear only as one
 * total ('other_tenants_in_flight'), so the list still adds up to the account's explained figure.
 */
export async function custodianComparisons(
  ctx: BalanceContext,
  tenantId: string,
  pass: CustodianAccountPass,
): Promise<PlaceComparison[]> {
  const figures = await withTenant(ctx.db, tenantId, (tx) => ledgerFigures(tx, tenantId));
  const own = pass.explanationsByTenant.get(tenantId) ?? [];
  const comparisons: PlaceComparison[] = [];
  for (const figure of figures.filter((f) => routeFor(f.network).kind === 'custodian')) {
    const account = pass.assets.get(figure.assetCode);
    const ownForAsset = own
      .filter((item) => item.assetCode === figure.assetCode)
      .map((item) => item.explanation);
    let others = 0n;
    for (const [member, items] of pass.explanationsByTenant) {
      if (member === tenantId) continue;
      for (const item of items) {
        if (item.assetCode === figure.assetCode) others += BigInt(item.explanation.amountMinor);
      }
    }
    comparisons.push({
      place: `custodian:${pass.account}`,
      assetCode: figure.assetCode,
      ledger: figure,
      expected: account?.expected ?? figure.custodyControl,
      observed: account?.observed ?? null,
      explanations:
        others === 0n
          ? ownForAsset
          : [
              ...ownForAsset,
              {
                kind: 'other_tenants_in_flight',
                subject: `custodian:${pass.account}`,
                amountMinor: others.toString(),
              },
            ],
      pinnedBlock: null,
      reportedAt: pass.report?.asOf ?? null,
      accountTenants: Math.max(account?.tenants ?? 1, 1),
      ...(pass.unobservedReason ? { unobservedReason: pass.unobservedReason } : {}),
    });
  }
  return comparisons;
}
