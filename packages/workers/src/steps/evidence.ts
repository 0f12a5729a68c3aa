import { getHotWallet, type Operation, withTenant } from '@idem/core';
import type { EvmLookupEvidence, ReferenceLookup } from '@idem/rails';
import type { Hex } from 'viem';
import { assetOf } from '../candidates.ts';
import type { WorkerContext } from '../context.ts';
import { routeFor } from '../rails.ts';

/**
 * What the authoritative side says about an operation, reduced to what the state machine acts on.
 * The chain is asked by transaction hash and by the wallet's nonce; the custodian by our reference.
 */
export type Verdict =
  | { kind: 'confirmed'; evidence: Record<string, unknown> }
  | { kind: 'in_progress'; evidence: Record<string, unknown> }
  | { kind: 'failed_on_rail'; evidence: Record<string, unknown> }
  | { kind: 'not_sent'; evidence: Record<string, unknown> }
  | { kind: 'not_found'; evidence: Record<string, unknown> }
  | { kind: 'contradictory'; evidence: Record<string, unknown> };

export async function gatherEvidence(ctx: WorkerContext, op: Operation): Promise<Verdict> {
  if (routeFor(op.network).kind === 'evm') return chainVerdict(ctx, op);
  return custodianVerdict(ctx, op);
}

async function chainVerdict(ctx: WorkerContext, op: Operation): Promise<Verdict> {
  const { wallet, asset } = await withTenant(ctx.db, op.tenantId, async (tx) => ({
    wallet: await getHotWallet(tx, op.tenantId, op.network),
    asset: await assetOf(tx, op),
  }));
  if (!op.txHash || op.chainNonce === null)
    return { kind: 'not_found', evidence: { reason: 'nothing signed' } };
  const found: EvmLookupEvidence = await ctx.rails.evmFor(wallet).lookup({
    txHash: op.txHash as Hex,
    sender: wallet.address as Hex,
    nonce: op.chainNonce,
  });
  const evidence: Record<string, unknown> = {
    rail: 'evm',
    found: found.found,
    head: found.headBlockNumber.toString(),
  };
  if (found.found === 'mined') {
    Object.assign(evidence, {
      blockNumber: found.blockNumber.toString(),
      blockHash: found.blockHash,
      confirmations: found.confirmations,
      status: found.status,
      depthRequired: asset.confirmations,
    });
    if (found.status === 'reverted') return { kind: 'failed_on_rail', evidence };
    return found.confirmations >= asset.confirmations
      ? { kind: 'confirmed', evidence }
      : { kind: 'in_progress', evidence };
  }
  if (found.found === 'pending') return { kind: 'in_progress', evidence };
  evidence.nonceConsumed = found.nonceConsumed;
  return found.nonceConsumed ? { kind: 'not_sent', evidence } : { kind: 'not_found', evidence };
}

async function custodianVerdict(ctx: WorkerContext, op: Operation): Promise<Verdict> {
  const found: ReferenceLookup = await ctx.rails.custodian().lookupByReference(op.operationId);
  const evidence: Record<string, unknown> = { rail: 'custodian', found: found.found };
  if (found.found === 'none') return { kind: 'not_found', evidence };
  if (found.found === 'many')
    return { kind: 'contradictory', evidence: { ...evidence, count: found.transfers.length } };
  const transfer = found.transfer;
  Object.assign(evidence, {
    providerId: transfer.id,
    status: transfer.status,
    txHash: transfer.txHash ?? null,
  });
  if (transfer.status === 'completed') return { kind: 'confirmed', evidence };
  if (transfer.status === 'failed')
    return { kind: 'not_sent', evidence: { ...evidence, failureReason: transfer.failureReason ?? null } };
  return { kind: 'in_progress', evidence };
}
