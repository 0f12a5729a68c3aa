import { IdemError } from '@idem/contracts';
import type { PublicClient } from 'viem';
import { z } from 'zod';

/**
 * EIP-1559 fees: the one place that decides what a transaction offers to pay. Fees are read from
 * the node each time a transaction is signed (never a constant): the pending block's base fee and
 * a priority fee from `eth_feeHistory` reward percentiles, shaped by a per-network policy.
 *
 * Amounts are wei per gas unless named otherwise. The approved fee cap of a withdrawal
 * (`feeCapMinor`) is a total in wei: gasLimit * maxFeePerGas may never exceed it (docs/API.md).
 */
export const feePolicySchema = z
  .object({
    /** Which percentile of recent blocks' priority fees to offer (1..99). */
    rewardPercentile: z.number().int().min(1).max(99).default(50),
    /** How many recent blocks the percentile is read over. */
    historyBlocks: z.number().int().min(1).max(1024).default(10),
    /**
     * The base-fee headroom signed into maxFeePerGas, in percent of the pending base fee: 200 lets
     * the transaction stay includable while the base fee doubles (about six full blocks).
     */
    baseFeeMultiplierPercent: z.number().int().min(100).max(1_000).default(200),
    /**
     * The least headroom a capped fee may keep, in percent of the pending base fee: below it the
     * withdrawal waits rather than being signed to get stuck. 113 covers one full block's rise (12.5%).
     */
    minHeadroomPercent: z.number().int().min(100).max(1_000).default(113),
    minPriorityFeeWei: z.bigint().min(0n).default(100_000_000n),
    maxPriorityFeeWei: z.bigint().min(0n).default(5_000_000_000n),
    /** The network's absolute ceiling per gas, whatever a withdrawal's cap allows. */
    maxFeePerGasWei: z.bigint().positive().default(500_000_000_000n),
    /** A replacement's raise on both fees over the previous attempt; geth's pool demands 10. */
    replacementBumpPercent: z.number().int().min(10).max(1_000).default(10),
  })
  .refine((p) => p.minPriorityFeeWei <= p.maxPriorityFeeWei, {
    error: 'minPriorityFeeWei must not exceed maxPriorityFeeWei',
  })
  .refine((p) => p.minHeadroomPercent <= p.baseFeeMultiplierPercent, {
    error: 'minHeadroomPercent must not exceed baseFeeMultiplierPercent',
  });

export type FeePolicy = z.output<typeof feePolicySchema>;
export type FeePolicyInput = z.input<typeof feePolicySchema>;

export function feePolicy(input: FeePolicyInput = {}): FeePolicy {
  const parsed = feePolicySchema.safeParse(input);
  if (!parsed.success) {
    const messages = parsed.error.issues.map((i) => `${i.path.join('.') || 'policy'}: ${i.message}`);
    throw new IdemError('VALIDATION', `invalid fee policy: ${messages.join('; ')}`, {
      issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
    });
  }
  return parsed.data;
}

/** What the node says a transaction should offer now, per gas. */
export interface FeeQuote {
  /** The pending block's base fee. */
  readonly baseFeePerGas: bigint;
  /** baseFee * multiplier + priority, bounded by the policy's ceiling. */
  readonly maxFeePerGas: bigint;
  readonly maxPriorityFeePerGas: bigint;
  /** The latest block the quote was read at. */
  readonly blockNumber: bigint;
}

export interface Fees {
  readonly maxFeePerGas: bigint;
  readonly maxPriorityFeePerGas: bigint;
}

/**
 * One `eth_feeHistory` call: its last base fee is the pending block's (the one our transaction
 * would enter), and its rewards give the priority fee. One call, so both come from one node's view.
 */
export async function quoteFees(
  client: Pick<PublicClient, 'getFeeHistory'>,
  policy: FeePolicy,
): Promise<FeeQuote> {
  const history = await client.getFeeHistory({
    blockCount: policy.historyBlocks,
    blockTag: 'latest',
    rewardPercentiles: [policy.rewardPercentile],
  });
  const baseFeePerGas = history.baseFeePerGas.at(-1);
  if (baseFeePerGas === undefined) throw new IdemError('INTERNAL', 'the node returned no base fee');
  // Empty blocks report a zero reward; they say nothing about what inclusion costs.
  const rewards = (history.reward ?? [])
    .filter((_, i) => (history.gasUsedRatio[i] ?? 0) > 0)
    .map((row) => row[0] ?? 0n)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const observed = rewards.length > 0 ? (rewards[Math.floor(rewards.length / 2)] ?? 0n) : 0n;
  const priority = clamp(observed, policy.minPriorityFeeWei, policy.maxPriorityFeeWei);
  const wanted = (baseFeePerGas * BigInt(policy.baseFeeMultiplierPercent)) / 100n + priority;
  const maxFeePerGas = min(wanted, policy.maxFeePerGasWei);
  return {
    baseFeePerGas,
    maxFeePerGas,
    maxPriorityFeePerGas: min(priority, maxFeePerGas),
    blockNumber: history.oldestBlock + BigInt(history.baseFeePerGas.length - 2),
  };
}

/** Why a transaction cannot be signed within its cap now (stable text; the numbers go in `detail`). */
export type CapVerdict =
  | { readonly ok: true; readonly fees: Fees }
  | {
      readonly ok: false;
      readonly reason: string;
      readonly detail: {
        readonly feeCapWei: string | null;
        readonly gasLimit: string;
        readonly baseFeePerGas: string;
        readonly requiredMaxFeePerGas: string;
        readonly requiredTotalWei: string;
      };
    };

/**
 * The fees to sign with under a withdrawal's approved cap (a total in wei, or none) and the
 * policy's ceiling: the quote when it fits; else the most the cap allows per gas, as long as that
 * keeps `minHeadroomPercent` over the pending base fee plus the priority fee. Below that the
 * transaction would sit unmined, so the caller waits and signs nothing.
 */
export function feesWithinCap(
  quote: FeeQuote,
  policy: FeePolicy,
  limit: { gasLimit: bigint; feeCapWei: bigint | null },
): CapVerdict {
  const capPerGas = limit.feeCapWei === null ? null : limit.feeCapWei / limit.gasLimit;
  const ceiling = capPerGas === null ? policy.maxFeePerGasWei : min(capPerGas, policy.maxFeePerGasWei);
  const required =
    (quote.baseFeePerGas * BigInt(policy.minHeadroomPercent) + 99n) / 100n + quote.maxPriorityFeePerGas;
  if (ceiling < required) {
    const byCap = capPerGas !== null && capPerGas < policy.maxFeePerGasWei;
    return {
      ok: false,
      reason: byCap
        ? 'the approved fee cap (wei of the native asset) cannot pay the current base fee plus headroom; waiting for fees to fall or a higher cap'
        : "the current base fee is above the network's fee ceiling; waiting for fees to fall",
      detail: {
        feeCapWei: limit.feeCapWei?.toString() ?? null,
        gasLimit: limit.gasLimit.toString(),
        baseFeePerGas: quote.baseFeePerGas.toString(),
        requiredMaxFeePerGas: required.toString(),
        requiredTotalWei: (required * limit.gasLimit).toString(),
      },
    };
  }
  const maxFeePerGas = min(quote.maxFeePerGas, ceiling);
  return { ok: true, fees: { maxFeePerGas, maxPriorityFeePerGas: quote.maxPriorityFeePerGas } };
}

/**
 * The fees of a replacement (same nonce) for a transaction that offered `previous`: at least the
 * node's replacement minimum (both fees raised by `replacementBumpPercent`, rounded up) and at
 * least what the node quotes now. With a limit, the total must stay within the approved cap and
 * the ceiling: above them the answer is `above_cap` and a higher cap needs a new approval.
 */
export function replacementFees(
  previous: Fees,
  quote: FeeQuote,
  policy: FeePolicy,
  limit?: { gasLimit: bigint; feeCapWei: bigint | null },
): { ok: true; fees: Fees } | { ok: false; reason: 'above_cap'; fees: Fees; ceilingPerGas: bigint } {
  const bump = (value: bigint) => (value * BigInt(100 + policy.replacementBumpPercent) + 99n) / 100n;
  const priority = max(bump(previous.maxPriorityFeePerGas), quote.maxPriorityFeePerGas);
  const maxFee = max(bump(previous.maxFeePerGas), quote.maxFeePerGas, priority);
  const fees = { maxFeePerGas: maxFee, maxPriorityFeePerGas: priority };
  const capPerGas = limit?.feeCapWei != null ? limit.feeCapWei / limit.gasLimit : null;
  const ceilingPerGas = capPerGas === null ? policy.maxFeePerGasWei : min(capPerGas, policy.maxFeePerGasWei);
  if (maxFee > ceilingPerGas) return { ok: false, reason: 'above_cap', fees, ceilingPerGas };
  return { ok: true, fees };
}

/** Math.min and Math.max take no bigints. */
function clamp(value: bigint, low: bigint, high: bigint): bigint {
  if (value < low) return low;
  if (value > high) return high;
  return value;
}

function min(a: bigint, b: bigint): bigint {
  return b < a ? b : a;
}

function max(...values: bigint[]): bigint {
  let largest = values[0] ?? 0n;
  for (const value of values) if (value > largest) largest = value;
  return largest;
}
