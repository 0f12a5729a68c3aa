import { getHotWallet, listAttempts, type Operation, withTenant } from '@idem/core';
import type { EvmLookupEvidence, ReferenceLookup } from '@idem/rails';
import type { Hex } from 'viem';
import { assetOf } from '../candidates.ts';
import type { WorkerContext } from '../context.ts';
import { custodianTermsDiffer } from '../custodian-terms.ts';
import { routeFor } from '../rails.ts';

/**
 * What the authoritative side says about an operation, reduced to what the state machine acts on.
 * The chain is asked by transaction hash and by the wallet's nonce; the custodian by our reference.
 */
export type Verdict =
  | { kind: 'confirmed'; evidence: Record<string, unknown> }
  /** Our own cancel attempt is mined at depth: nothing of ours can pay any more. */
  | { kind: 'cancelled'; evidence: Record<string, unknown> }
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
  const { wallet, asset, attempts } = await withTenant(ctx.db, op.tenantId, async (tx) => ({
    wallet: await getHotWallet(tx, op.tenantId, op.network),
    asset: await assetOf(tx, op),
    attempts: await listAttempts(tx, op.tenantId, op.operationId),
  }));
  if (!op.txHash || op.chainNonce === null)
    return { kind: 'not_found', evidence: { reason: 'nothing signed' } };
  const nonce = op.chainNonce;
  // Every attempt shares the nonce, so at most one is mined; whichever it is settles.
  const ours: OurAttempt[] =
    attempts.length > 0
      ? attempts.map((a) => ({ txHash: a.txHash as Hex, attemptNo: a.attemptNo, kind: a.kind }))
      : [{ txHash: op.txHash as Hex, attemptNo: 1, kind: 'original' }];
  const rail = ctx.rails.evmFor(wallet);
  const ourHashes = ours.map((a) => a.txHash);
  const look = (attempt: OurAttempt) =>
    rail.lookup({ txHash: attempt.txHash, sender: wallet.address as Hex, nonce });
  // Newest first: the highest fee is the likeliest to be mined.
  const newestFirst = [...ours].reverse();
  let pending = false;
  let newestAbsent = false;
  let absent: Extract<EvmLookupEvidence, { found: 'absent' }> | null = null;
  for (const [index, attempt] of newestFirst.entries()) {
    const found = await look(attempt);
    if (found.found === 'mined') return minedVerdict(found, attempt, asset.confirmations, ourHashes);
    if (found.found === 'pending') pending = true;
    else {
      if (index === 0) newestAbsent = true;
      if (!absent || found.nonceConsumed) absent = found;
    }
  }
  const head = absent?.headBlockNumber ?? 0n;
  if (pending || !absent) {
    // An older attempt is in the pool but the newest is not (a worker died between recording and
    // broadcasting it): the watch step sends the newest recorded bytes.
    const evidence = { rail: 'evm', found: 'pending', head: head.toString(), ourHashes, newestAbsent };
    return { kind: 'in_progress', evidence };
  }
  const evidence: Record<string, unknown> = {
    rail: 'evm',
    found: 'absent',
    head: head.toString(),
    nonceConsumed: absent.nonceConsumed,
    ourHashes,
  };
  if (!absent.nonceConsumed) return { kind: 'not_found', evidence };
  // The nonce is passed. One attempt may have been mined between our lookups of the others: ask
  // every hash once more, now that the nonce was read passed; only none of ours mined is "not sent".
  for (const attempt of newestFirst) {
    const found = await look(attempt);
    if (found.found === 'mined') return minedVerdict(found, attempt, asset.confirmations, ourHashes);
    if (found.found === 'pending') return { kind: 'in_progress', evidence };
  }
  return { kind: 'not_sent', evidence };
}

interface OurAttempt {
  txHash: Hex;
  attemptNo: number;
  kind: 'original' | 'replacement' | 'cancel';
}

function minedVerdict(
  found: Extract<EvmLookupEvidence, { found: 'mined' }>,
  attempt: OurAttempt,
  depth: number,
  ourHashes: Hex[],
): Verdict {
  const evidence: Record<string, unknown> = {
    rail: 'evm',
    found: 'mined',
    head: found.headBlockNumber.toString(),
    blockNumber: found.blockNumber.toString(),
    blockHash: found.blockHash,
    confirmations: found.confirmations,
    status: found.status,
    depthRequired: depth,
    // The attempt that was mined is the settled transaction, whichever it is.
    settledTxHash: attempt.txHash,
    settledAttemptNo: attempt.attemptNo,
    settledAttemptKind: attempt.kind,
    ourHashes,
  };
  if (found.status === 'reverted') return { kind: 'failed_on_rail', evidence };
  if (found.confirmations < depth) return { kind: 'in_progress', evidence };
  // Our own cancel took the nonce: the payment can never be mined.
  return attempt.kind === 'cancel' ? { kind: 'cancelled', evidence } : { kind: 'confirmed', evidence };
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
  // A transfer under our reference with other terms is not ours settling: reconciliation
  // records the variance; the state machine treats it as a contradiction (UNKNOWN, an owner).
  const differs = custodianTermsDiffer(op, transfer);
  if (differs.length > 0) return { kind: 'contradictory', evidence: { ...evidence, differs } };
  if (transfer.status === 'completed') return { kind: 'confirmed', evidence };
  if (transfer.status === 'failed')
    return { kind: 'not_sent', evidence: { ...evidence, failureReason: transfer.failureReason ?? null } };
  return { kind: 'in_progress', evidence };
}

/**
 * What a custodian's completed transfer tells the tenant about where the money went: its id and
 * the hash it reports, each recorded once (the database keeps both final).
 */
export function custodianSettlement(
  op: Operation,
  evidence: Record<string, unknown>,
): { providerRef?: string; providerTxHash?: string } | undefined {
  if (evidence.rail !== 'custodian') return undefined;
  const set: { providerRef?: string; providerTxHash?: string } = {};
  if (!op.providerRef && typeof evidence.providerId === 'string') set.providerRef = evidence.providerId;
  if (!op.providerTxHash && typeof evidence.txHash === 'string') set.providerTxHash = evidence.txHash;
  return Object.keys(set).length > 0 ? set : undefined;
}
