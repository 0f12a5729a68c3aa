import { amountMinorSchema, isValidDestination } from '@idem/contracts';
import type { Address, Hex } from 'viem';
import { z } from 'zod';

const evmAddressSchema = z
  .string()
  .refine((value) => isValidDestination('ethereum', value), { error: 'not a valid EVM address (EIP-55)' })
  .transform((value) => value as Address);

/** Minor units as a decimal string or a bigint; always a positive integer, never a float. */
const minorSchema = z
  .union([z.bigint().positive(), amountMinorSchema])
  .transform((value) => (typeof value === 'bigint' ? value : BigInt(value)));

/** What to send: native ETH, or an ERC-20 `transfer(to, amount)` on a token contract. */
export const evmTransferSchema = z.discriminatedUnion('asset', [
  z.object({ asset: z.literal('native'), to: evmAddressSchema, amountMinor: minorSchema }),
  z.object({
    asset: z.literal('erc20'),
    token: evmAddressSchema,
    to: evmAddressSchema,
    amountMinor: minorSchema,
  }),
]);

/**
 * A request to sign one transfer. The nonce is an input: allocating nonces is the ledger's job
 * (one database row per sender), never a read of the node's pending count at signing time, which
 * two workers could read alike. Fees are caps the caller decided; the rail never picks them itself.
 */
export const evmSignRequestSchema = z.object({
  transfer: evmTransferSchema,
  nonce: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  gasLimit: minorSchema,
  maxFeePerGas: minorSchema,
  maxPriorityFeePerGas: minorSchema,
});

export type EvmTransferInput = z.input<typeof evmTransferSchema>;
export type EvmSignRequestInput = z.input<typeof evmSignRequestSchema>;
export type EvmSignRequest = z.output<typeof evmSignRequestSchema>;

/** Signed bytes and their identity. Persist all of it (recordSigned) before the first broadcast. */
export interface SignedEvmTransaction {
  readonly rawTransaction: Hex;
  /** keccak256 of the raw bytes: the same bytes always have this hash. */
  readonly txHash: Hex;
  readonly sender: Address;
  readonly nonce: number;
  readonly chainId: number;
}

/**
 * The outcome of one `eth_sendRawTransaction`. A closed set, in the order a caller should act on:
 * - accepted: the node has the transaction (fresh, already in its pool, or already mined).
 * - rejected: the node answered that it will not take these bytes. Nothing entered the pool.
 * - ambiguous: no reliable answer (timeout, reset, 5xx, an error we do not recognise). The
 *   transaction may or may not be in a pool; it is neither success nor failure (mark UNKNOWN and
 *   reconcile with `lookup`).
 */
export type BroadcastOutcome =
  | {
      readonly outcome: 'accepted';
      readonly txHash: Hex;
      /** True when the node already knew the transaction (pool or chain): a rebroadcast, not a new send. */
      readonly alreadyKnown: boolean;
    }
  | {
      readonly outcome: 'rejected';
      readonly txHash: Hex;
      readonly reason: BroadcastRejection;
      readonly detail: string;
    }
  | {
      readonly outcome: 'ambiguous';
      readonly txHash: Hex;
      readonly reason: BroadcastAmbiguity;
      readonly detail: string;
    };

export type BroadcastRejection =
  /** The nonce is already used by a mined transaction that is not ours. */
  | 'nonce_too_low'
  /** Another transaction with this nonce is in the node's pool and ours does not outbid it. */
  | 'nonce_in_use_pending'
  | 'insufficient_funds'
  | 'fee_too_low'
  | 'gas_limit'
  | 'invalid_transaction';

export type BroadcastAmbiguity =
  | 'timeout'
  | 'connection'
  | 'http_status'
  | 'unrecognised_error'
  | 'hash_mismatch';

/**
 * Chain evidence about one transaction, gathered at one point in time (`headBlockNumber`).
 * - mined: in a canonical block (its hash re-checked against the block at that height).
 * - pending: the node has it in its pool, not in a block.
 * - absent: the node knows nothing of it. `nonceConsumed` says whether the sender's mined
 *   transaction count has passed our nonce while our transaction is not mined: another
 *   transaction took the nonce, so ours can never be mined (evidence for VERIFIED_NOT_SENT once the
 *   consuming block is deep enough). Absent with `nonceConsumed: false` proves nothing.
 */
export type EvmLookupEvidence =
  | {
      readonly found: 'mined';
      readonly blockNumber: bigint;
      readonly blockHash: Hex;
      /** 1 when in the head block. */
      readonly confirmations: number;
      readonly status: 'success' | 'reverted';
      readonly headBlockNumber: bigint;
    }
  | { readonly found: 'pending'; readonly headBlockNumber: bigint }
  | {
      readonly found: 'absent';
      readonly nonceConsumed: boolean;
      /** The sender's transaction count at `headBlockNumber` (the next nonce the chain expects). */
      readonly minedNonce: number;
      readonly headBlockNumber: bigint;
    };

export interface EvmLookupRequest {
  readonly txHash: Hex;
  readonly sender: Address;
  readonly nonce: number;
}

/** An incoming transfer to a watched address, with a stable id for inbox deduplication. */
export interface EvmDeposit {
  /** `${txHash}:native` or `${txHash}:${logIndex}`: unique per credited movement. */
  readonly depositId: string;
  readonly asset: 'native' | 'erc20';
  /** The token contract for erc20; null for native. */
  readonly token: Address | null;
  readonly from: Address;
  readonly to: Address;
  readonly amountMinor: bigint;
  readonly txHash: Hex;
  readonly blockNumber: bigint;
  readonly blockHash: Hex;
  readonly confirmations: number;
}

/** What a transfer must have done to count as paying a withdrawal. */
export type EvmTransferTerms =
  | { readonly asset: 'native'; readonly to: Address; readonly amountMinor: bigint }
  | { readonly asset: 'erc20'; readonly token: Address; readonly to: Address; readonly amountMinor: bigint };

/**
 * A question for a person's resolution of a stuck withdrawal (C14, C15): did it pay, or can
 * nothing of ours still pay? Every read is pinned to the block at the asset's depth.
 */
export interface EvmSettlementRequest {
  /** The hot wallet: the sender of our transaction. */
  readonly sender: Address;
  /**
   * Our stored signed transaction; null when nothing was ever signed (no bytes exist to be mined).
   * `attempts`: every other hash we signed for the same nonce (fee bumps, cancels); a nonce taken
   * by any of them was taken by us.
   */
  readonly ours: { readonly txHash: Hex; readonly nonce: number; readonly attempts?: readonly Hex[] } | null;
  /** The transaction said to have paid; ours when not named. */
  readonly namedTxHash: Hex | null;
  readonly terms: EvmTransferTerms;
  /** The asset's confirmation depth (1: the head block counts), as the watch step counts it. */
  readonly depth: number;
  /** Which answer the caller hopes to prove; checked first. */
  readonly intent: 'paid' | 'not_sent';
}

/**
 * The chain's answer, read at `pinnedBlockNumber` (head - depth + 1):
 * - paid: `txHash` is mined at or below the pinned block, succeeded, was sent by the hot wallet and
 *   moved exactly the terms; and if it is not our stored transaction, ours can no longer be mined.
 * - not_sent: nothing of ours can still pay: our nonce was consumed at the pinned block by a
 *   transaction that is not ours (`nonce_consumed_by_other`: that transaction found, by reads at
 *   explicit blocks, in the block where the sender's count passed our nonce; never inferred from a
 *   receipt a lagging node has not seen), our own transaction reverted at depth
 *   (`reverted_at_depth`), or nothing was ever signed (`never_signed`). A taken nonce proves it
 *   only once the taker's block is at or below the node's finalized block (I32-FINAL): else
 *   unproven, `not_final`, or `finalized_block_unknown` when the node cannot say.
 * - unproven: anything else, with the reason. Throws when the node cannot be asked.
 */
export interface EvmSettlementEvidence {
  readonly verdict: 'paid' | 'not_sent' | 'unproven';
  readonly reason: string;
  readonly txHash: Hex | null;
  readonly headBlockNumber: bigint;
  readonly pinnedBlockNumber: bigint;
  /** The sender's mined transaction count at the pinned block (null when nothing was signed). */
  readonly minedNonceAtPin: number | null;
  /** Where the transaction examined was mined, when it was. */
  readonly blockNumber: bigint | null;
  /** Why the transaction claimed to have paid did not prove it, when the answer is another. */
  readonly claimCheck: string | null;
  /** The transaction that took our nonce at or below the pinned block, when it was taken. */
  readonly consumer: { readonly txHash: Hex; readonly blockNumber: bigint; readonly blockHash: Hex } | null;
  /** The node's finalized block, when a taken nonce needed it read. */
  readonly finalizedBlockNumber: bigint | null;
}
