import type { Operation } from '@idem/core';
import type { Hex } from 'viem';
import type { WorkerContext } from './context.ts';
import { NATIVE_ASSETS, routeFor } from './rails.ts';

export interface NetworkFee {
  assetCode: string;
  amountMinor: bigint;
}

/**
 * The gas a confirmed withdrawal's transaction paid, from its receipt: gasUsed * effectiveGasPrice,
 * in the network's native asset (ETH for an ERC-20 withdrawal too). Null on a custodian rail (the
 * custodian charges its own fee). The mined hash is the one the evidence names (the settled attempt), else the stored
 * one; a receipt from another block than the evidence's is no answer. Throws when the node cannot
 * be asked: the caller then changes nothing this pass.
 */
export async function paidNetworkFee(
  ctx: WorkerContext,
  op: Operation,
  evidence: Record<string, unknown>,
): Promise<NetworkFee | null> {
  if (routeFor(op.network).kind !== 'evm') return null;
  const assetCode = NATIVE_ASSETS[op.network];
  // A fee bump may have been mined instead of the original: the evidence names the settled attempt.
  const named = [evidence.settledTxHash, evidence.txHash].find((value) => typeof value === 'string');
  const hash = (named as string | undefined) ?? op.txHash;
  if (!assetCode || !hash) throw new Error(`no native asset or transaction for operation ${op.operationId}`);
  const receipt = await ctx.rails.chain().getTransactionReceipt({ hash: hash as Hex });
  if (
    typeof evidence.blockHash === 'string' &&
    evidence.blockHash.toLowerCase() !== receipt.blockHash.toLowerCase()
  ) {
    throw new Error('the receipt is from another block than the confirmation evidence');
  }
  return { assetCode, amountMinor: receipt.gasUsed * receipt.effectiveGasPrice };
}
