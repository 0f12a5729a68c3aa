/**
 * What the EVM rail reads of the chain for reconciliation: a transaction, its receipt only while
 * its block is canonical (C17), and the lookup that tells mined, pending and absent apart.
 */
import {
  type Hex,
  type PublicClient,
  TransactionNotFoundError,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
} from 'viem';
import type { EvmLookupEvidence, EvmLookupRequest } from './types.ts';

export async function getTransactionOrNull(client: PublicClient, txHash: Hex) {
  try {
    return await client.getTransaction({ hash: txHash });
  } catch (error) {
    if (error instanceof TransactionNotFoundError) return null;
    throw error;
  }
}

async function getReceiptOrNull(client: PublicClient, txHash: Hex) {
  try {
    return await client.getTransactionReceipt({ hash: txHash });
  } catch (error) {
    if (error instanceof TransactionReceiptNotFoundError) return null;
    throw error;
  }
}

/** A receipt counts only if its block is still the canonical block at that height (reorgs, C17). */
export async function canonicalReceipt(client: PublicClient, txHash: Hex) {
  const receipt = await getReceiptOrNull(client, txHash);
  if (!receipt) return null;
  const block = await client.getBlock({ blockNumber: receipt.blockNumber }).catch((error: unknown) => {
    if (error instanceof Error && error.name === 'BlockNotFoundError') return null;
    throw error;
  });
  return block && block.hash === receipt.blockHash ? receipt : null;
}

async function minedEvidence(client: PublicClient, receipt: TransactionReceipt): Promise<EvmLookupEvidence> {
  const head = await client.getBlockNumber({ cacheTime: 0 });
  return {
    found: 'mined',
    blockNumber: receipt.blockNumber,
    blockHash: receipt.blockHash,
    confirmations: Number(head - receipt.blockNumber + 1n),
    status: receipt.status,
    headBlockNumber: head,
  };
}

export async function lookup(client: PublicClient, request: EvmLookupRequest): Promise<EvmLookupEvidence> {
  const receipt = await canonicalReceipt(client, request.txHash);
  if (receipt) return minedEvidence(client, receipt);
  const transaction = await getTransactionOrNull(client, request.txHash);
  if (transaction && transaction.blockNumber === null) {
    return { found: 'pending', headBlockNumber: await client.getBlockNumber({ cacheTime: 0 }) };
  }
  // Pin the nonce read to one block, then look for our receipt again: if our transaction were in
  // any block up to that one, the receipt would exist now, so a passed nonce is someone else's.
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const minedNonce = await client.getTransactionCount({ address: request.sender, blockNumber: head });
  const receiptAfter = await canonicalReceipt(client, request.txHash);
  if (receiptAfter) return minedEvidence(client, receiptAfter);
  return { found: 'absent', nonceConsumed: minedNonce > request.nonce, minedNonce, headBlockNumber: head };
}
