import { and, eq } from 'drizzle-orm';
import type { Tx } from '../../db/connect.ts';
import { assets } from '../../db/schema/index.ts';
import { validation } from '../../operations/input-validation.ts';

/** The key and reference of the operation an approved proposal creates: one proposal, one operation. */
export function proposalOperationKey(proposalId: string): string {
  return `proposal-${proposalId}`;
}

export async function assetKnown(tx: Tx, tenantId: string, asset: string): Promise<void> {
  const rows = await tx
    .select({ code: assets.code })
    .from(assets)
    .where(and(eq(assets.tenantId, tenantId), eq(assets.code, asset)));
  if (rows.length === 0) throw validation('payload.asset', `unknown asset ${asset}`);
}
