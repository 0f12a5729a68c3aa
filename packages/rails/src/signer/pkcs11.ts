/**
 * Hot-wallet keys in a PKCS#11 token (CloudHSM, Luna, YubiHSM, SoftHSM2 in tests): the key pair is
 * generated inside the token (secp256k1, private key sensitive and non-extractable), the address
 * comes from the token's public key (CKA_EC_POINT), and the token signs 32-byte digests with
 * CKM_ECDSA. The process holds a logged-in session and object handles, never key material.
 *
 * A key is named by a reference in the form of RFC 7512 (a PKCS#11 URI):
 *   pkcs11:token=<label>;id=%01%02…?module-path=/path/lib.so&pin-source=env:NAME
 * The PIN comes from `pin-source`: `env:NAME` (a variable) or `file:/absolute/path` (its first
 * line). The reference is what the database stores; it locates the key and holds no secret.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { IdemError } from '@idem/contracts';
import type * as Pkcs11Binding from 'pkcs11js';
import { type Address, getAddress, type Hex } from 'viem';
import { publicKeyToAddress } from 'viem/accounts';
import { z } from 'zod';
import { type DigestSigner, ethereumSignature } from './signer.ts';

/** DER of the secp256k1 curve's object identifier (1.3.132.0.10), the key's CKA_EC_PARAMS. */
const secp256k1Params = Buffer.from('06052b8104000a', 'hex');
const keyIdBytes = 8;

const tokenLabelSchema = z.string().regex(/^[A-Za-z0-9._-]{1,32}$/, 'token label: letters, digits, . _ -');
const modulePathSchema = z.string().regex(/^\/[A-Za-z0-9._/+-]+$/, 'module path: an absolute path');
/** A secret reference, never the secret: a variable's name or a file's path. */
export const pinRefSchema = z
  .string()
  .regex(/^(env:[A-Z][A-Z0-9_]*|file:\/[A-Za-z0-9._/-]+)$/, 'PIN reference: env:NAME or file:/path');

export interface Pkcs11KeyLocation {
  modulePath: string;
  tokenLabel: string;
  /** CKA_ID of the key pair, hex. */
  keyId: string;
  pinRef: string;
}

export { modulePathSchema as pkcs11ModulePathSchema, tokenLabelSchema as pkcs11TokenLabelSchema };

const keyRefPattern = /^pkcs11:token=([^;?]+);id=((?:%[0-9a-f]{2})+)\?module-path=([^&]+)&pin-source=(.+)$/;

export function isPkcs11KeyRef(keyRef: string): boolean {
  return keyRef.startsWith('pkcs11:');
}

export function formatPkcs11KeyRef(location: Pkcs11KeyLocation): string {
  const id = location.keyId.replace(/(..)/g, '%$1');
  return `pkcs11:token=${location.tokenLabel};id=${id}?module-path=${location.modulePath}&pin-source=${location.pinRef}`;
}

export function parsePkcs11KeyRef(keyRef: string): Pkcs11KeyLocation {
  const match = keyRefPattern.exec(keyRef);
  const parsed = z
    .object({
      tokenLabel: tokenLabelSchema,
      keyId: z.string().regex(/^[0-9a-f]{2,64}$/),
      modulePath: modulePathSchema,
      pinRef: pinRefSchema,
    })
    .safeParse({
      tokenLabel: match?.[1],
      keyId: match?.[2]?.replaceAll('%', ''),
      modulePath: match?.[3],
      pinRef: match?.[4],
    });
  if (!match || !parsed.success) {
    throw new IdemError(
      'VALIDATION',
      'not a PKCS#11 key reference (pkcs11:token=…;id=…?module-path=…&pin-source=…)',
    );
  }
  return parsed.data;
}

/** Reads a PIN from its reference at the moment it is needed; the value is never logged or stored. */
export function readPin(pinRef: string): string {
  const ref = pinRefSchema.parse(pinRef);
  if (ref.startsWith('env:')) {
    const value = process.env[ref.slice(4)];
    if (!value) throw new IdemError('VALIDATION', `HSM PIN variable ${ref.slice(4)} is not set`);
    return value;
  }
  const value = readFileSync(ref.slice(5), 'utf8').split('\n')[0]?.trim();
  if (!value) throw new IdemError('VALIDATION', 'the HSM PIN file is empty');
  return value;
}

type Binding = typeof Pkcs11Binding;
let loaded: Binding | null = null;

/**
 * The native binding, loaded at the first PKCS#11 use: a process whose hot wallets use no HSM
 * (the embedded demo) starts even where the addon was not built (pkcs11js is optional; building it
 * needs Node's headers, see .ci/run).
 */
function binding(): Binding {
  if (loaded) return loaded;
  try {
    loaded = createRequire(import.meta.url)('pkcs11js') as Binding;
  } catch (error) {
    throw new IdemError(
      'VALIDATION',
      `the PKCS#11 binding (pkcs11js) is not built here: ${String(error).slice(0, 120)}; run pnpm rebuild pkcs11js with npm_config_nodedir set to Node's headers`,
    );
  }
  return loaded;
}

const modules = new Map<string, Pkcs11Binding.PKCS11>();

/** The module loaded and initialised once per process (C_Initialize may run only once). */
export function pkcs11Module(modulePath: string): Pkcs11Binding.PKCS11 {
  const existing = modules.get(modulePath);
  if (existing) return existing;
  const pkcs11js = binding();
  const module = new pkcs11js.PKCS11();
  module.load(modulePath);
  // The binding signs on libuv's threads: the library must lock for itself.
  module.C_Initialize({ flags: pkcs11js.CKF_OS_LOCKING_OK });
  modules.set(modulePath, module);
  return module;
}

/**
 * A session that stays open and logged in for the life of the process: PKCS#11 login state is
 * per application and token, so every later session of ours is logged in too.
 */
const loggedIn = new Map<string, Buffer>();

function slotOf(module: Pkcs11Binding.PKCS11, tokenLabel: string): Buffer {
  const slot = module.C_GetSlotList(true).find((s) => module.C_GetTokenInfo(s).label.trim() === tokenLabel);
  if (!slot) throw new IdemError('VALIDATION', `no PKCS#11 token labelled ${tokenLabel}`);
  return slot;
}

function login(
  module: Pkcs11Binding.PKCS11,
  modulePath: string,
  tokenLabel: string,
  pin: () => string,
): Buffer {
  const pkcs11js = binding();
  const cacheKey = `${modulePath}\u0000${tokenLabel}`;
  const slot = slotOf(module, tokenLabel);
  if (!loggedIn.has(cacheKey)) {
    const session = module.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION | pkcs11js.CKF_RW_SESSION);
    try {
      module.C_Login(session, pkcs11js.CKU_USER, pin());
    } catch (error) {
      if (!String(error).includes('CKR_USER_ALREADY_LOGGED_IN')) {
        module.C_CloseSession(session);
        throw new IdemError('UNAUTHORIZED', `PKCS#11 login to token ${tokenLabel} refused`);
      }
    }
    loggedIn.set(cacheKey, session);
  }
  return slot;
}

function findObject(
  module: Pkcs11Binding.PKCS11,
  session: Buffer,
  objectClass: number,
  keyId: string,
): Buffer {
  const pkcs11js = binding();
  module.C_FindObjectsInit(session, [
    { type: pkcs11js.CKA_CLASS, value: objectClass },
    { type: pkcs11js.CKA_ID, value: Buffer.from(keyId, 'hex') },
  ]);
  const found = module.C_FindObjects(session, 2);
  module.C_FindObjectsFinal(session);
  if (found.length !== 1 || !found[0]) {
    throw new IdemError(
      'VALIDATION',
      `expected one key with id ${keyId} in the token, found ${found.length}`,
    );
  }
  return found[0];
}

/** The address of a public key object: keccak of the uncompressed point inside CKA_EC_POINT's DER. */
function addressOf(module: Pkcs11Binding.PKCS11, session: Buffer, publicKey: Buffer): Address {
  const pkcs11js = binding();
  const [attribute] = module.C_GetAttributeValue(session, publicKey, [{ type: pkcs11js.CKA_EC_POINT }]);
  const value = attribute?.value;
  // An OCTET STRING (04 41) around the uncompressed point (04 X Y); some tokens give the bare point.
  const point =
    value?.length === 67 && value[0] === 0x04 && value[1] === 0x41
      ? value.subarray(2)
      : value?.length === 65
        ? value
        : null;
  if (point?.[0] !== 0x04)
    throw new IdemError('VALIDATION', 'the token key is not an uncompressed secp256k1 point');
  return getAddress(publicKeyToAddress(`0x${point.toString('hex')}`));
}

/**
 * Generates a secp256k1 key pair inside the token and returns its reference and address. The
 * private key is a token object, private, sensitive and never extractable.
 */
export async function createPkcs11Key(input: {
  modulePath: string;
  tokenLabel: string;
  pinRef: string;
  label: string;
}): Promise<{ keyRef: string; address: Address }> {
  const modulePath = modulePathSchema.parse(input.modulePath);
  const tokenLabel = tokenLabelSchema.parse(input.tokenLabel);
  const pinRef = pinRefSchema.parse(input.pinRef);
  const module = pkcs11Module(modulePath);
  const pkcs11js = binding();
  const slot = login(module, modulePath, tokenLabel, () => readPin(pinRef));
  const keyId = randomBytes(keyIdBytes);
  const session = module.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION | pkcs11js.CKF_RW_SESSION);
  try {
    const common = [
      { type: pkcs11js.CKA_KEY_TYPE, value: pkcs11js.CKK_EC },
      { type: pkcs11js.CKA_TOKEN, value: true },
      { type: pkcs11js.CKA_LABEL, value: input.label },
      { type: pkcs11js.CKA_ID, value: keyId },
    ];
    const keys = await module.C_GenerateKeyPairAsync(
      session,
      { mechanism: pkcs11js.CKM_EC_KEY_PAIR_GEN },
      [
        ...common,
        { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PUBLIC_KEY },
        { type: pkcs11js.CKA_PRIVATE, value: false },
        { type: pkcs11js.CKA_VERIFY, value: true },
        { type: pkcs11js.CKA_EC_PARAMS, value: secp256k1Params },
      ],
      [
        ...common,
        { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
        { type: pkcs11js.CKA_PRIVATE, value: true },
        { type: pkcs11js.CKA_SENSITIVE, value: true },
        { type: pkcs11js.CKA_EXTRACTABLE, value: false },
        { type: pkcs11js.CKA_SIGN, value: true },
      ],
    );
    const address = addressOf(module, session, keys.publicKey);
    const keyRef = formatPkcs11KeyRef({ modulePath, tokenLabel, keyId: keyId.toString('hex'), pinRef });
    return { keyRef, address };
  } finally {
    module.C_CloseSession(session);
  }
}

/** A signer for one key of a token, logged in through the key reference's PIN source. */
export function openPkcs11Signer(keyRef: string): DigestSigner {
  const location = parsePkcs11KeyRef(keyRef);
  return openPkcs11Key({ ...location, pin: () => readPin(location.pinRef) });
}

/**
 * A signer for one key of a token, the module, token and PIN given by the caller rather than by a
 * key reference: the signer service takes them from its own configuration and only the key id
 * from the database.
 */
export function openPkcs11Key(location: {
  modulePath: string;
  tokenLabel: string;
  keyId: string;
  pin: () => string;
}): DigestSigner {
  modulePathSchema.parse(location.modulePath);
  tokenLabelSchema.parse(location.tokenLabel);
  const module = pkcs11Module(location.modulePath);
  const pkcs11js = binding();
  const slot = login(module, location.modulePath, location.tokenLabel, location.pin);
  const session = module.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION);
  let privateKey: Buffer;
  let address: Address;
  try {
    privateKey = findObject(module, session, pkcs11js.CKO_PRIVATE_KEY, location.keyId);
    address = addressOf(
      module,
      session,
      findObject(module, session, pkcs11js.CKO_PUBLIC_KEY, location.keyId),
    );
  } finally {
    module.C_CloseSession(session);
  }
  return {
    address,
    location: `pkcs11 token ${location.tokenLabel} key ${location.keyId}`,
    async signDigest(digest: Hex) {
      // One session per signature: a call abandoned at its deadline never blocks the next one.
      const signing = module.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION);
      try {
        module.C_SignInit(signing, { mechanism: pkcs11js.CKM_ECDSA }, privateKey);
        const raw = await module.C_SignAsync(signing, Buffer.from(digest.slice(2), 'hex'), Buffer.alloc(64));
        if (raw.length !== 64)
          throw new IdemError('SIGNER_UNAVAILABLE', 'the token returned a malformed signature');
        const r = BigInt(`0x${raw.subarray(0, 32).toString('hex')}`);
        const s = BigInt(`0x${raw.subarray(32).toString('hex')}`);
        return ethereumSignature(digest, { r, s }, address);
      } finally {
        module.C_CloseSession(signing);
      }
    },
  };
}
