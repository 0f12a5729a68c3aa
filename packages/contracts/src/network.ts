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
