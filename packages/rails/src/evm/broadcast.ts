import { IdemError } from '@idem/contracts';
import { type Hex, isHex, keccak256, type PublicClient } from 'viem';
import { getTransactionOrNull } from './chain-reads.ts';
import { readBroadcastError } from './classify.ts';
import type { BroadcastOutcome } from './types.ts';

/** The largest raw transaction we will send: far above any transfer, far below a node's 128 KiB limit. */
const rawTransactionBytesMax = 16 * 1024;

/**
 * Sends stored bytes once through `sender` and classifies the answer; never retries by itself.
 * `client` (the rail's usual one) makes the follow-up read a "nonce too low" needs.
 */
export async function broadcast(
  client: PublicClient,
  sender: PublicClient,
  rawTransaction: Hex,
): Promise<BroadcastOutcome> {
  if (!isHex(rawTransaction, { strict: true }) || rawTransaction.length > 2 + rawTransactionBytesMax * 2) {
    // Programmer error: these bytes never came from `sign`.
    throw new IdemError('VALIDATION', 'rawTransaction must be 0x-prefixed hex of at most 16 KiB');
  }
  const txHash = keccak256(rawTransaction);
  let returned: Hex;
  try {
    returned = await sender.sendRawTransaction({ serializedTransaction: rawTransaction });
  } catch (error) {
    const reading = readBroadcastError(error);
    switch (reading.kind) {
      case 'already_known':
        return { outcome: 'accepted', txHash, alreadyKnown: true };
      case 'nonce_too_low':
        return classifyNonceTooLow(client, txHash, reading.detail);
      case 'rejected':
        return { outcome: 'rejected', txHash, reason: reading.reason, detail: reading.detail };
      case 'ambiguous':
        return { outcome: 'ambiguous', txHash, reason: reading.reason, detail: reading.detail };
    }
  }
  if (returned.toLowerCase() !== txHash.toLowerCase()) {
    // The node names a different transaction than the bytes we sent: we cannot say what it took.
    return { outcome: 'ambiguous', txHash, reason: 'hash_mismatch', detail: `node returned ${returned}` };
  }
  return { outcome: 'accepted', txHash, alreadyKnown: false };
}

/**
 * "nonce too low" answers a rebroadcast of our own mined transaction as well as a transaction
 * whose nonce another one took. Only the chain can tell which: our hash mined means accepted.
 */
async function classifyNonceTooLow(
  client: PublicClient,
  txHash: Hex,
  detail: string,
): Promise<BroadcastOutcome> {
  try {
    const transaction = await getTransactionOrNull(client, txHash);
    if (transaction) return { outcome: 'accepted', txHash, alreadyKnown: true };
    return { outcome: 'rejected', txHash, reason: 'nonce_too_low', detail };
  } catch (error) {
    return {
      outcome: 'ambiguous',
      txHash,
      reason: 'unrecognised_error',
      detail: `nonce too low, and the follow-up lookup failed: ${String(error).slice(0, 200)}`,
    };
  }
}
