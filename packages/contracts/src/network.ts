import { validate as validateBitcoin } from 'bitcoin-address-validation';
import { isAddress } from 'viem';
import { z } from 'zod';

export const networkSchema = z.enum(['bitcoin', 'ethereum']);
export type Network = z.infer<typeof networkSchema>;

/**
 * Whether a destination is a valid address on a network. EVM addresses must pass EIP-55: a
 * mixed-case address with a wrong checksum is refused, since it usually means a typo.
 */
export function isValidDestination(network: Network, destination: string): boolean {
  switch (network) {
    case 'ethereum':
      return /^0x[0-9a-fA-F]{40}$/.test(destination) && isAddress(destination, { strict: true });
    case 'bitcoin':
      return validateBitcoin(destination);
  }
}

/**
 * What a withdrawal's `feeCapMinor` means on each network, checked at submission.
 * - ethereum: the most the transaction may cost, in wei of ETH (the network's native asset),
 *   whatever asset is withdrawn: gasLimit * maxFeePerGas <= feeCapMinor. At least 21,000 (one
 *   plain transfer at 1 wei per gas; anything less can never pay), at most 10^20 (100 ETH).
 * - bitcoin: not accepted; the custodian chooses and charges the network fee.
 */
export const FEE_CAP_RULES: Record<Network, { nativeAsset: string; min: bigint; max: bigint } | null> = {
  ethereum: { nativeAsset: 'ETH', min: 21_000n, max: 10n ** 20n },
  bitcoin: null,
};

/** Why a fee cap is not acceptable on a network, or null when it is. */
export function feeCapProblem(network: Network, feeCapMinor: string): string | null {
  const rule = FEE_CAP_RULES[network];
  if (!rule)
    return `feeCapMinor is not accepted on ${network}: the custodian sets and charges the network fee`;
  const cap = BigInt(feeCapMinor);
  if (cap < rule.min || cap > rule.max) {
    return `feeCapMinor on ${network} is the total fee in wei of ${rule.nativeAsset}, from ${rule.min} to ${rule.max}`;
  }
  return null;
}
