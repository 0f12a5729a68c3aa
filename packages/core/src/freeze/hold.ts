import { type SQL, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';

/**
 * Whether a freeze in force holds the withdrawal on the row being claimed (docs/GOVERNANCE.md
 * "Freeze"): one of its tenant's, one of its asset's, or one of its account's. A condition of the
 * claims' own UPDATE statements (../state-machine/lease.ts) and of the workers' candidate reads, so
 * a worker claims nothing under a freeze committed before its claim ran: the freeze and the claim
 * meet in one statement, not in a read the worker made a moment before. The columns of `operations`
 * are named in full: inside the sub-select an unqualified name would be the freeze's own.
 */
export function heldByFreeze(): SQL {
  return sql`exists (select 1 from freezes f where ${freezeCoversWhere({
    tenantId: sql`"operations"."tenant_id"`,
    assetCode: sql`"operations"."asset_code"`,
    accountRef: sql`"operations"."account_ref"`,
  })})`;
}

export function notHeldByFreeze(): SQL {
  return sql`not ${heldByFreeze()}`;
}

/**
 * The one rule of what a freeze covers, on the freezes aliased `f`: in force, and of the tenant,
 * of the asset, or of the account given (columns of the row being claimed, or a request's values).
 * The claims, the dry run, the Freeze screen's held list and the signer service all ask it.
 */
export function freezeCoversWhere(of: { tenantId: SQL; assetCode: SQL; accountRef: SQL }): SQL {
  return sql`f.tenant_id = ${of.tenantId}
       and f.lifted_at is null
       and (f.scope = 'tenant'
         or (f.scope = 'asset' and f.asset_code = ${of.assetCode})
         or (f.scope = 'account' and f.account_ref = ${of.accountRef}))`;
}

/** For a withdrawal not stored yet (the dry run): one boolean column, `frozen`. */
export function freezeCovers(tenantId: string, assetCode: string, accountRef: string): SQL {
  return sql`select exists (select 1 from freezes f where ${freezeCoversWhere({
    tenantId: sql`${tenantId}::uuid`,
    assetCode: sql`${assetCode}`,
    accountRef: sql`${accountRef}`,
  })}) as frozen`;
}

/**
 * Whether a freeze in force covers one stored withdrawal now, by the claims' rule: for a worker told
 * by the signer service that it is frozen, to tell a freeze that raced its claim from a disagreement.
 */
export async function withdrawalHeldByFreeze(
  tx: Tx,
  tenantId: string,
  operationId: string,
): Promise<boolean> {
  const rows = await tx.execute(sql`select 1 from operations
    where tenant_id = ${tenantId}::uuid and operation_id = ${operationId}::uuid and ${heldByFreeze()}`);
  return rowsOf(rows).length > 0;
}
