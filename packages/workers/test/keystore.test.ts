import { createCipheriv, randomBytes, scryptSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keccak256 } from 'viem';
import { describe, expect, it } from 'vitest';
import { decryptKeystore } from '../src/keystore.ts';
import { defaultKeyResolver, RailRegistry, signerFor } from '../src/rails.ts';

/** Writes a version 3 keystore the way a wallet does (small scrypt cost to keep the test fast). */
function encrypt(privateKey: string, password: string): string {
  const salt = randomBytes(32);
  const iv = randomBytes(16);
  const derived = scryptSync(password, salt, 32, { N: 2 ** 12, r: 8, p: 1 });
  const cipher = createCipheriv('aes-128-ctr', derived.subarray(0, 16), iv);
  const ciphertext = Buffer.concat([cipher.update(Buffer.from(privateKey.slice(2), 'hex')), cipher.final()]);
  const mac = keccak256(Buffer.concat([derived.subarray(16, 32), ciphertext])).slice(2);
  return JSON.stringify({
    version: 3,
    crypto: {
      cipher: 'aes-128-ctr',
      cipherparams: { iv: iv.toString('hex') },
      ciphertext: ciphertext.toString('hex'),
      kdf: 'scrypt',
      kdfparams: { n: 2 ** 12, r: 8, p: 1, dklen: 32, salt: salt.toString('hex') },
      mac,
    },
  });
}

const key = `0x${'ab'.repeat(32)}`;

describe('hot wallet keys from a keystore file', () => {
  it('decrypts a version 3 keystore with its password and refuses a wrong one', () => {
    const file = encrypt(key, 'correct horse');
    expect(decryptKeystore(file, 'correct horse')).toBe(key);
    expect(() => decryptKeystore(file, 'wrong horse')).toThrow(/password is wrong/);
  });

  it('decrypts the Web3 Secret Storage PBKDF2 test vector', () => {
    const vector = JSON.stringify({
      crypto: {
        cipher: 'aes-128-ctr',
        cipherparams: { iv: '6087dab2f9fdbbfaddc31a909735c1e6' },
        ciphertext: '5318b4d5bcd28de64ee5559e671353e16f075ecae9f99c7a79a38af5f869aa46',
        kdf: 'pbkdf2',
        kdfparams: {
          c: 262144,
          dklen: 32,
          prf: 'hmac-sha256',
          salt: 'ae3cd4e7013836a3df6bd7241b12db061dbe2c6785853cce422d148a624ce0bd',
        },
        mac: '517ead924a9d0dc3124507e3393d175ce3ff7c1e96529c6c555ce9e51205e9b2',
      },
      version: 3,
    });
    expect(decryptKeystore(vector, 'testpassword')).toBe(
      '0x7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d',
    );
  });

  it('resolves keystore:<path>#<VARIABLE> key references, and refuses a missing password', () => {
    const dir = mkdtempSync(join(tmpdir(), 'idem-keystore-'));
    const path = join(dir, 'hot-wallet.json');
    writeFileSync(path, encrypt(key, 's3cret-pass'));
    process.env.IDEM_TEST_KEYSTORE_PASSWORD = 's3cret-pass';
    expect(defaultKeyResolver(`keystore:${path}#IDEM_TEST_KEYSTORE_PASSWORD`)).toBe(key);
    expect(() => defaultKeyResolver(`keystore:${path}#IDEM_TEST_UNSET_PASSWORD`)).toThrow(/not set/);
    delete process.env.IDEM_TEST_KEYSTORE_PASSWORD;
  });
});

/** Anvil's development account 1 as a registered hot wallet. */
const devWallet = {
  tenantId: '00000000-0000-4000-8000-000000000001',
  network: 'ethereum',
  address: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  keyRef: 'dev:1',
  nextNonce: 0,
  createdAt: new Date(),
};

describe('I18 in-process keys are for development chains only', () => {
  const wallet = { ...devWallet, keyRef: 'env:IDEM_TEST_HOT_KEY' };

  it('I18 a key from a variable or a keystore file is refused on any chain but a development chain', () => {
    process.env.IDEM_TEST_HOT_KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
    try {
      expect(() => signerFor(wallet.keyRef, 1)).toThrow(/refused on chain 1/);
      expect(() => signerFor('keystore:/tmp/x.json#IDEM_TEST_PW', 1)).toThrow(/refused on chain 1/);
      expect(signerFor(wallet.keyRef, 31337).address).toBe(wallet.address);
    } finally {
      delete process.env.IDEM_TEST_HOT_KEY;
    }
  });

  it('I32-CHAIN no hot wallet signs before the node itself reported the configured chain', () => {
    expect(() =>
      new RailRegistry({ evm: { rpcUrl: 'http://127.0.0.1:1', chainId: 31337 } }).evmFor(devWallet),
    ).toThrow(/chain id is not verified/);
  });

  it('I18 a keystore whose key derivation costs more than the ceiling is refused before any work', () => {
    const file = JSON.parse(encrypt(key, 'pw')) as { crypto: { kdfparams: { n: number } } };
    file.crypto.kdfparams.n = 2 ** 22;
    expect(() => decryptKeystore(JSON.stringify(file), 'pw')).toThrow(/allowed scrypt or pbkdf2 cost/);
  });
});

describe('development keys', () => {
  it('are refused for any chain but the local development chain', () => {
    expect(() => signerFor(devWallet.keyRef, 1)).toThrow(/refused on chain 1/);
    expect(signerFor(devWallet.keyRef, 31337).address).toBe(devWallet.address);
  });
});
