import { createDecipheriv, pbkdf2Sync, scryptSync, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { IdemError } from '@idem/contracts';
import { type Hex, hexToBytes, keccak256 } from 'viem';
import { z } from 'zod';

const hexString = z.string().regex(/^[0-9a-fA-F]+$/);

/** An encrypted key file in the Web3 Secret Storage format (version 3), as wallets and geth write it. */
const keystoreSchema = z.object({
  version: z.literal(3).optional(),
  crypto: z.object({
    cipher: z.literal('aes-128-ctr'),
    cipherparams: z.object({ iv: hexString }),
    ciphertext: hexString,
    kdf: z.enum(['scrypt', 'pbkdf2']),
    kdfparams: z.union([
      z.object({
        n: z.number().int().positive(),
        r: z.number().int().positive(),
        p: z.number().int().positive(),
        dklen: z.literal(32),
        salt: hexString,
      }),
      z.object({
        c: z.number().int().positive(),
        prf: z.literal('hmac-sha256'),
        dklen: z.literal(32),
        salt: hexString,
      }),
    ]),
    mac: hexString,
  }),
});

/** Key-derivation cost ceilings: a hostile file must not pin the worker's CPU or memory. */
const SCRYPT_N_MAX = 2 ** 20;
const PBKDF2_ROUNDS_MAX = 10_000_000;

/**
 * Decrypts a hot wallet key from a keystore file with its password. The MAC is checked before
 * anything is decrypted, so a wrong password is refused, never turned into a wrong key.
 */
export function decryptKeystore(json: string, password: string): Hex {
  const parsed = keystoreSchema.safeParse(JSON.parse(json));
  if (!parsed.success)
    throw new IdemError('VALIDATION', 'not a version 3 keystore (aes-128-ctr, scrypt or pbkdf2)');
  const { crypto } = parsed.data;
  const salt = Buffer.from(crypto.kdfparams.salt, 'hex');
  let derived: Buffer;
  if ('n' in crypto.kdfparams) {
    const { n, r, p } = crypto.kdfparams;
    if (n > SCRYPT_N_MAX)
      throw new IdemError('VALIDATION', 'keystore scrypt cost is above the allowed maximum');
    derived = scryptSync(password, salt, 32, { N: n, r, p, maxmem: 256 * n * r + 1024 * 1024 });
  } else {
    if (crypto.kdfparams.c > PBKDF2_ROUNDS_MAX)
      throw new IdemError('VALIDATION', 'keystore pbkdf2 cost is above the allowed maximum');
    derived = pbkdf2Sync(password, salt, crypto.kdfparams.c, 32, 'sha256');
  }
  const ciphertext = Buffer.from(crypto.ciphertext, 'hex');
  const mac = hexToBytes(keccak256(Buffer.concat([derived.subarray(16, 32), ciphertext])));
  const expected = Buffer.from(crypto.mac, 'hex');
  if (expected.length !== mac.length || !timingSafeEqual(expected, Buffer.from(mac))) {
    throw new IdemError('UNAUTHORIZED', 'the keystore password is wrong or the file is damaged');
  }
  const decipher = createDecipheriv(
    'aes-128-ctr',
    derived.subarray(0, 16),
    Buffer.from(crypto.cipherparams.iv, 'hex'),
  );
  const key = Buffer.concat([decipher.update(ciphertext), decipher.final()]);
  if (key.length !== 32) throw new IdemError('VALIDATION', 'the keystore does not hold a 32-byte key');
  return `0x${key.toString('hex')}`;
}

/** Reads and decrypts a keystore file; the password comes from an environment variable. */
export function readKeystore(path: string, passwordVariable: string): Hex {
  const password = process.env[passwordVariable];
  if (!password)
    throw new IdemError('VALIDATION', `keystore password variable ${passwordVariable} is not set`);
  return decryptKeystore(readFileSync(path, 'utf8'), password);
}
