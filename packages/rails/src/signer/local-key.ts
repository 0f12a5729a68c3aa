/**
 * An in-process key: anvil's development keys, a variable or a keystore file. Kept only for the
 * embedded demo and development chains; the worker refuses it anywhere else (docs/SIGNING.md).
 */
import type { Hex } from 'viem';
import { privateKeyToAccount, sign } from 'viem/accounts';
import type { DigestSigner } from './signer.ts';

/** Chains an in-process key may sign for: anvil/Hardhat (31337) and geth --dev (1337). */
export const DEVELOPMENT_CHAIN_IDS: readonly number[] = [31337, 1337];

export function localKeySigner(privateKey: Hex, location: string): DigestSigner {
  const { address } = privateKeyToAccount(privateKey);
  return {
    address,
    location,
    // RFC 6979 with low s (noble): the same digest always gives the same signature.
    signDigest: async (hash) => {
      const { r, s, yParity } = await sign({ hash, privateKey, to: 'object' });
      return { r, s, yParity: yParity === 1 ? 1 : 0 };
    },
  };
}
