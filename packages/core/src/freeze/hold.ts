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
