/**
 * Manual resolution's proof for the EVM rail: whether a stuck withdrawal paid, or can never pay,
 * read at the asset's depth by reads that each name their block. "Never" also needs the
 * transaction that took our nonce to be final (I32-FINAL): a reorganisation deeper than the
 * depth could swap it for our signed payment, and a released hold cannot be taken back.
 */
import { IdemError } from '@idem/contracts';
import {
  type Address,
  erc20Abi,
  type Hex,
  type PublicClient,
  parseEventLogs,
  type TransactionReceipt,
} from 'viem';
import { canonicalReceipt } from './chain-reads.ts';
import type { EvmSettlementEvidence, EvmSettlementRequest } from './types.ts';

/** Whether `txHash` is one of `ours` (every hash we signed for a nonce: the original, bumps, cancels). */
function isOneOf(txHash: Hex, ours: readonly Hex[]): boolean {
  return ours.some((hash) => hash.toLowerCase() === txHash.toLowerCase());
}

export async function settlement(
  client: PublicClient,
  request: EvmSettlementRequest,
): Promise<EvmSettlementEvidence> {
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const pinned = head - BigInt(Math.max(request.depth, 1)) + 1n;
  const base = { headBlockNumber: head, pinnedBlockNumber: pinned };
  if (pinned < 0n) {
    return {
      verdict: 'unproven',
      reason: 'chain_shorter_than_depth',
      txHash: null,
      ...base,
      minedNonceAtPin: null,
      blockNumber: null,
      claimCheck: null,
      consumer: null,
      finalizedBlockNumber: null,
    };
  }
  const ours = request.ours;
  const minedNonceAtPin = ours
    ? await client.getTransactionCount({ address: request.sender, blockNumber: pinned })
    : null;
  // Which transaction took our nonce, found in the block where the sender's count passed it, by
  // reads at explicit blocks at or below the pinned one. A lagging node cannot fake this answer
  // (it refuses blocks it lacks), where a receipt it has not seen yet would look "absent".
  const consumer =
    ours && minedNonceAtPin !== null && minedNonceAtPin > ours.nonce
      ? await nonceConsumer(client, request.sender, ours.nonce, pinned, minedNonceAtPin)
      : null;
  const consumerIsOurs =
    consumer !== null && ours !== null && isOneOf(consumer.txHash, [ours.txHash, ...(ours.attempts ?? [])]);
  const ourReceipt = ours ? await canonicalReceipt(client, ours.txHash) : null;
  const ourDeep = ourReceipt !== null && ourReceipt.blockNumber <= pinned;
  /** The node's finalized block, once read (only a taken nonce needs it). */
  let finalizedBlockNumber: bigint | null = null;
  const answer = (
    verdict: EvmSettlementEvidence['verdict'],
    reason: string,
    txHash: Hex | null,
    blockNumber: bigint | null,
  ): EvmSettlementEvidence => ({
    verdict,
    reason,
    txHash,
    ...base,
    minedNonceAtPin,
    blockNumber,
    claimCheck: null,
    consumer,
    finalizedBlockNumber,
  });

  // Can our stored bytes still be mined? Not if nothing was signed, if they were mined, or if
  // their nonce was consumed at depth by a transaction that is not ours.
  const oursSpent = ours === null || ourDeep || (consumer !== null && !consumerIsOurs);

  /**
   * Null when the transaction that took our nonce, mined in `blockNumber`, is final; else why not.
   * Releasing waits for the node's finalized block (the worker's automatic release asks this same
   * proof; its release after our own cancel waits the same way, in workers' finality.ts): the
   * confirmation depth suffices for a payment, which is re-checked for reorganisations after it is
   * CONFIRMED; a release is not. A node that cannot say which block is finalized makes nothing final.
   */
  const notFinal = async (blockNumber: bigint): Promise<string | null> => {
    try {
      finalizedBlockNumber = (await client.getBlock({ blockTag: 'finalized' })).number;
    } catch {
      return 'finalized_block_unknown';
    }
    return blockNumber <= finalizedBlockNumber ? null : 'not_final';
  };

  /** Proven not sent, or why not. */
  const notSent = async (): Promise<EvmSettlementEvidence | string> => {
    // No bytes exist to be mined: nothing to wait for.
    if (!ours) return answer('not_sent', 'never_signed', null, null);
    if (ourReceipt) {
      if (ourReceipt.status === 'success') return 'our_transaction_mined';
      if (!ourDeep) return 'reverted_not_deep_enough';
      // Our own reverted transaction holds the nonce: a reorganisation could mine these bytes
      // again (on other state they may succeed), or a fee bump of them, so it must be final too.
      return (
        (await notFinal(ourReceipt.blockNumber)) ??
        answer('not_sent', 'reverted_at_depth', ours.txHash, ourReceipt.blockNumber)
      );
    }
    if (!consumer) return 'nonce_not_consumed_at_depth';
    // Ours took it, though its receipt is not (yet) visible here: it was sent.
    if (consumerIsOurs) return 'nonce_consumed_by_ours';
    return (
      (await notFinal(consumer.blockNumber)) ?? answer('not_sent', 'nonce_consumed_by_other', null, null)
    );
  };
  const paid = async (): Promise<EvmSettlementEvidence> => {
    const named = request.namedTxHash ?? ours?.txHash ?? null;
    if (!named) return answer('unproven', 'no_transaction_named', null, null);
    const isOurs = ours !== null && named.toLowerCase() === ours.txHash.toLowerCase();
    const receipt = isOurs ? ourReceipt : await canonicalReceipt(client, named);
    if (!receipt) return answer('unproven', 'not_mined', named, null);
    if (receipt.status !== 'success') return answer('unproven', 'reverted', named, receipt.blockNumber);
    if (receipt.blockNumber > pinned)
      return answer('unproven', 'not_deep_enough', named, receipt.blockNumber);
    const terms = await termsMismatch(client, named, receipt, request);
    if (terms) return answer('unproven', terms, named, receipt.blockNumber);
    // Someone else's payment settles the hold only if our own bytes can no longer pay again.
    if (!isOurs && !oursSpent) {
      return answer('unproven', 'our_transaction_still_mineable', named, receipt.blockNumber);
    }
    // ...and for good: when what spent our nonce is another transaction (the named one, or a
    // third), a reorganisation deeper than the depth could drop it and mine our stored bytes, a
    // second payment. Only our own mined bytes, or none signed, need no finality.
    if (!isOurs && ours !== null && !ourDeep && consumer !== null) {
      const pending = await notFinal(consumer.blockNumber);
      if (pending) return answer('unproven', pending, named, receipt.blockNumber);
    }
    return answer(
      'paid',
      isOurs ? 'our_transaction_mined' : 'named_transaction_mined',
      named,
      receipt.blockNumber,
    );
  };

  if (request.intent === 'not_sent') {
    const proven = await notSent();
    if (typeof proven !== 'string') return proven;
    const other = await paid();
    return other.verdict === 'paid' ? other : answer('unproven', proven, ours?.txHash ?? null, null);
  }
  const proven = await paid();
  if (proven.verdict === 'paid') return proven;
  // Not paid as asserted, but proven never able to pay: say so, and why the assertion failed.
  const other = await notSent();
  return typeof other === 'string' ? proven : { ...other, claimCheck: proven.reason };
}

/**
 * The transaction of `sender` with `nonce`, mined at or below `pinned` (where the sender's count
 * is `countAtPin` > nonce): the first block whose count passes the nonce holds it. Every read
 * names its block. Throws when the node cannot answer or contradicts itself.
 */
async function nonceConsumer(
  client: PublicClient,
  sender: Address,
  nonce: number,
  pinned: bigint,
  countAtPin: number,
): Promise<{ txHash: Hex; blockNumber: bigint; blockHash: Hex }> {
  if (countAtPin <= nonce) throw new Error('nonce not consumed at the pinned block');
  let below = -1n;
  let at = pinned;
  while (at - below > 1n) {
    const middle = below + (at - below) / 2n;
    const count = await client.getTransactionCount({ address: sender, blockNumber: middle });
    if (count > nonce) at = middle;
    else below = middle;
  }
  const block = await client.getBlock({ blockNumber: at, includeTransactions: true });
  const taken = block.transactions.find(
    (t) => t.from.toLowerCase() === sender.toLowerCase() && t.nonce === nonce,
  );
  if (!taken || !block.hash) {
    throw new IdemError(
      'INTERNAL',
      `the node shows nonce ${nonce} consumed in block ${at} without its transaction`,
    );
  }
  return { txHash: taken.hash, blockNumber: at, blockHash: block.hash };
}

/** Null when the mined transaction moved exactly the terms from the sender; else what differs. */
async function termsMismatch(
  client: PublicClient,
  txHash: Hex,
  receipt: TransactionReceipt,
  request: EvmSettlementRequest,
): Promise<string | null> {
  const transaction = await client.getTransaction({ hash: txHash });
  const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();
  if (!same(transaction.from, request.sender)) return 'sender_differs';
  const terms = request.terms;
  if (terms.asset === 'native') {
    if (!same(transaction.to, terms.to)) return 'destination_differs';
    if (transaction.value !== terms.amountMinor) return 'amount_differs';
    return null;
  }
  if (!same(transaction.to, terms.token)) return 'token_differs';
  const transfers = parseEventLogs({ abi: erc20Abi, eventName: 'Transfer', logs: receipt.logs }).filter(
    (log) => same(log.address, terms.token) && same(log.args.from, request.sender),
  );
  if (transfers.length !== 1 || !transfers[0]) return 'token_transfer_not_found';
  if (!same(transfers[0].args.to, terms.to)) return 'destination_differs';
  if (transfers[0].args.value !== terms.amountMinor) return 'amount_differs';
  return null;
}
