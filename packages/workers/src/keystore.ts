import { readFileSync } from 'node:fs';
import { IdemError } from '@idem/contracts';
import { decryptKeystoreJsonSync } from 'ethers';
import type { Hex } from 'viem';
import { z } from 'zod';

/**
 * The key-derivation cost of a Web3 Secret Storage file, checked before ethers decrypts it: a
 * hostile file must not pin the worker's CPU or memory.
 */
const keystoreCostSchema = z.object({
  crypto: z.object({
    kdf: z.enum(['scrypt', 'pbkdf2']),
    kdfparams: z.union([
      z.object({
        n: z
          .number()
          .int()
          .positive()
          .max(2 ** 20),
      }),
      z.object({ c: z.number().int().positive().max(10_000_000) }),
    ]),
  }),
});

/**
 * Decrypts a hot wallet key from a keystore file (Web3 Secret Storage v3, as wallets and geth
 * write it) with ethers' implementation. The MAC is checked before anything is decrypted, so a
 * wrong password is refused, never turned into a wrong key. Development chains only (SIGNING.md).
 */
export function decryptKeystore(json: string, password: string): Hex {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new IdemError('VALIDATION', 'the keystore file is not JSON');
  }
  if (!keystoreCostSchema.safeParse(parsed).success) {
    throw new IdemError('VALIDATION', 'not a version 3 keystore within the allowed scrypt or pbkdf2 cost');
  }
  try {
    return decryptKeystoreJsonSync(json, password).privateKey as Hex;
  } catch {
    throw new IdemError('UNAUTHORIZED', 'the keystore password is wrong or the file is damaged');
  }
}

/** Reads and decrypts a keystore file; the password comes from an environment variable. */
export function readKeystore(path: string, passwordVariable: string): Hex {
  const password = process.env[passwordVariable];
  if (!password)
    throw new IdemError('VALIDATION', `keystore password variable ${passwordVariable} is not set`);
  return decryptKeystore(readFileSync(path, 'utf8'), password);
}
