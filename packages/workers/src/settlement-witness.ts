import {
  attemptHashes,
  type Database,
  getHotWallet,
  type Operation,
  type SettlementAttestation,
  withTenant,
} from '@idem/core';
import type { EvmSettlementEvidence, EvmTransferTerms, ReferenceLookup } from '@idem/rails';
import type { Address, Hex } from 'viem';
import { assetOf } from './candidates.ts';
import { NATIVE_ASSETS, type RailRegistry, routeFor } from './rails.ts';

/** What a person proposes to do with a stuck withdrawal, and the transaction said to have paid. */
export interface SettlementAssertion {
  toState: 'CONFIRMED' | 'VERIFIED_NOT_SENT';
  txHash?: string | null | undefined;
}

/** The longest a witness waits for the rail before answering UNPROVEN. */
const WITNESS_DEADLINE_MS = 15_000;

/**
 * Asks the authoritative side about a withdrawal a person wants to resolve (C14, C15, I11-F4):
 * the chain, read at the asset's confirmation depth (a taken nonce only once the node calls its
 * block finalized, I32-FINAL), or the custodian, by our reference. The answer is evidence for the
 * four-eyes proposal, never a decision by itself; an unreachable or slow rail, or an answer short
 * of proof, is UNPROVEN. Error text is not kept (provider URLs can carry keys): only the error's
 * name.
 */
export async function attestSettlement(
  deps: { db: Database; rails: RailRegistry },
  op: Operation,
  assertion: SettlementAssertion,
): Promise<SettlementAttestation> {
  const source = routeFor(op.network).kind === 'evm' ? 'chain' : 'custodian';
  const observedAt = () => new Date().toISOString();
  let timer: NodeJS.Timeout | undefined;
  try {
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new WitnessTimeout()), WITNESS_DEADLINE_MS);
    });
    const asked = source === 'chain' ? chainAttestation(deps, op, assertion) : custodianAttestation(deps, op);
    const answer = await Promise.race([asked, deadline]);
    return {
      source,
      observedAt: observedAt(),
      ...answer,
      detail: { operationId: op.operationId, ...answer.detail },
    };
  } catch (error) {
    return {
      verdict: 'UNPROVEN',
      source,
      txHash: null,
      observedAt: observedAt(),
      detail: {
        operationId: op.operationId,
        reason: 'rail_unreachable',
        error: error instanceof Error ? error.name : 'unknown',
      },
    };
  } finally {
    clearTimeout(timer);
  }
}

class WitnessTimeout extends Error {
  override readonly name = 'WitnessTimeout';
}

type Answer = Pick<SettlementAttestation, 'verdict' | 'txHash' | 'detail'>;

async function chainAttestation(
  deps: { db: Database; rails: RailRegistry },
  op: Operation,
  assertion: SettlementAssertion,
): Promise<Answer> {
  const { wallet, asset, attempts } = await withTenant(deps.db, op.tenantId, async (tx) => ({
    wallet: await getHotWallet(tx, op.tenantId, op.network),
    asset: await assetOf(tx, op),
    attempts: await attemptHashes(tx, op.tenantId, op.operationId),
  }));
  const to = (op.destination ?? '') as Address;
  const amountMinor = BigInt(op.amountMinor);
  const terms: EvmTransferTerms = asset.contractAddress
    ? { asset: 'erc20', token: asset.contractAddress as Address, to, amountMinor }
    : { asset: 'native', to, amountMinor };
  // Bytes are persisted with their nonce in the transaction that signs them (C12): no artifact
  // means nothing was ever signed. A stored artifact without its hash or nonce proves nothing.
  if (op.signedArtifact && (!op.txHash || op.chainNonce === null)) {
    return { verdict: 'UNPROVEN', txHash: null, detail: { reason: 'stored_artifact_incomplete' } };
  }
  const ours = op.signedArtifact
    ? {
        txHash: op.txHash as Hex,
        nonce: op.chainNonce as number,
        // Every hash we signed for this nonce (attempt 1 is the stored one): any of them is ours.
        attempts: attempts as Hex[],
      }
    : null;
  const found: EvmSettlementEvidence = await deps.rails.evmReader().settlement({
    sender: wallet.address as Address,
    ours,
    namedTxHash: (assertion.txHash as Hex | null | undefined) ?? null,
    terms,
    depth: asset.confirmations,
    intent: assertion.toState === 'CONFIRMED' ? 'paid' : 'not_sent',
  });
  // A payment confirmed by hand posts the gas it paid, as the watcher's confirmation does: read
  // from the paying transaction's receipt, or nothing is proven yet.
  let networkFee: { networkFeeAsset: string; networkFeeMinor: string } | null = null;
  if (found.verdict === 'paid' && found.txHash) {
    const nativeAsset = NATIVE_ASSETS[op.network];
    const receipt = await deps.rails
      .chain()
      .getTransactionReceipt({ hash: found.txHash as Hex })
      .catch(() => null);
    if (!receipt || !nativeAsset) {
      return { verdict: 'UNPROVEN', txHash: null, detail: { reason: 'network_fee_unreadable' } };
    }
    networkFee = {
      networkFeeAsset: nativeAsset,
      networkFeeMinor: (receipt.gasUsed * receipt.effectiveGasPrice).toString(),
    };
  }
  return {
    verdict: found.verdict === 'paid' ? 'PAID' : found.verdict === 'not_sent' ? 'NOT_SENT' : 'UNPROVEN',
    txHash: found.txHash,
    detail: {
      ...networkFee,
      reason: found.reason,
      depthRequired: asset.confirmations,
      headBlock: found.headBlockNumber.toString(),
      pinnedBlock: found.pinnedBlockNumber.toString(),
      hotWallet: wallet.address,
      ourNonce: op.chainNonce,
      minedNonceAtPin: found.minedNonceAtPin,
      blockNumber: found.blockNumber?.toString() ?? null,
      consumer: found.consumer
        ? {
            txHash: found.consumer.txHash,
            blockNumber: found.consumer.blockNumber.toString(),
            blockHash: found.consumer.blockHash,
          }
        : null,
      finalizedBlock: found.finalizedBlockNumber?.toString() ?? null,
      ...(found.claimCheck ? { claimCheck: found.claimCheck } : {}),
    },
  };
}

async function custodianAttestation(deps: { rails: RailRegistry }, op: Operation): Promise<Answer> {
  const found: ReferenceLookup = await deps.rails.custodian().lookupByReference(op.operationId);
  if (found.found === 'none') {
    // The custodian's authoritative answer that it holds nothing under our reference.
    return { verdict: 'NOT_SENT', txHash: null, detail: { reason: 'no_record_for_reference' } };
  }
  if (found.found === 'many') {
    return {
      verdict: 'UNPROVEN',
      txHash: null,
      detail: { reason: 'several_transfers_for_reference', count: found.transfers.length },
    };
  }
  const transfer = found.transfer;
  const detail = { providerId: transfer.id, status: transfer.status };
  const sameTerms =
    transfer.asset === op.assetCode &&
    transfer.amountMinor === String(op.amountMinor) &&
    transfer.destination === (op.destination ?? '');
  if (!sameTerms) {
    return { verdict: 'UNPROVEN', txHash: null, detail: { ...detail, reason: 'terms_differ' } };
  }
  if (transfer.status === 'completed') {
    return {
      verdict: 'PAID',
      txHash: transfer.txHash ?? null,
      detail: { ...detail, reason: 'completed' },
    };
  }
  if (transfer.status === 'failed') {
    // Failed is the custodian's terminal answer: the transfer will not be executed.
    return { verdict: 'NOT_SENT', txHash: null, detail: { ...detail, reason: 'failed_at_custodian' } };
  }
  return { verdict: 'UNPROVEN', txHash: null, detail: { ...detail, reason: 'still_in_progress' } };
}
