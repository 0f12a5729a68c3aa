import { and, eq } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { riskPolicies } from '../db/schema/index.ts';
import { getOperation } from '../operations/operation-record.ts';
import { reachesFourEyes } from '../risk/review.ts';

/**
 * How many people besides the proposer approve a proposal that moves `amountMinor` of an asset:
 * two at or above the asset's four-eyes threshold (its risk rule, as for withdrawals), one below it
 * or when the asset has no rule.
 */
export async function approvalsByAmount(
  tx: Tx,
  tenantId: string,
  assetCode: string,
  amountMinor: bigint,
): Promise<number> {
  const [policy] = await tx
    .select({ fourEyesMinMinor: riskPolicies.fourEyesMinMinor })
    .from(riskPolicies)
    .where(and(eq(riskPolicies.tenantId, tenantId), eq(riskPolicies.assetCode, assetCode)));
  if (!policy) return 1;
  return reachesFourEyes(amountMinor, policy) ? 2 : 1;
}

/** The same for a proposal about a withdrawal: tiered by the withdrawal's own amount and asset. */
export async function approvalsForOperation(tx: Tx, tenantId: string, operationId: string): Promise<number> {
  const op = await getOperation(tx, tenantId, operationId);
  return approvalsByAmount(tx, tenantId, op.assetCode, BigInt(op.amountMinor));
}
