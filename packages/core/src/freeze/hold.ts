import { type SQL, sql } from 'drizzle-orm';

/**
 * Whether a freeze in force holds the withdrawal on the row being claimed (docs/GOVERNANCE.md
 * "Freeze"): one of its tenant's, one of its asset's, or one of its account's. A condition of the
 * claims' own UPDATE statements (../state-machine/lease.ts) and of the workers' candidate reads, so
 * a worker claims nothing under a freeze committed before its claim ran: the freeze and the claim
 * meet in one statement, not in a read the worker made a moment before. The columns of `operations`
 * are named in full: inside the sub-select an unqualified name would be the freeze's own.
 */
export function heldByFreeze(): SQL {
  return sql`exists (
    select 1 from freezes f
     where f.tenant_id = "operations"."tenant_id"
       and f.lifted_at is null
       and (f.scope = 'tenant'
         or (f.scope = 'asset' and f.asset_code = "operations"."asset_code")
         or (f.scope = 'account' and f.account_ref = "operations"."account_ref")))`;
}

export function notHeldByFreeze(): SQL {
  return sql`not ${heldByFreeze()}`;
}

/**
 * The same rule for a withdrawal not stored yet (the dry run): whether a freeze in force covers
 * this tenant, asset or account. One boolean column, `frozen`.
 */
export function freezeCovers(tenantId: string, assetCode: string, accountRef: string): SQL {
  return sql`select exists (
    select 1 from freezes f
     where f.tenant_id = ${tenantId}
       and f.lifted_at is null
       and (f.scope = 'tenant'
         or (f.scope = 'asset' and f.asset_code = ${assetCode})
         or (f.scope = 'account' and f.account_ref = ${accountRef}))) as frozen`;
}
