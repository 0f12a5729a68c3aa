import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { IdemError } from '@idem/contracts';

/**
 * TOTP secrets at rest: envelope encryption with AES-256-GCM. Each secret is encrypted under a data
 * key of its own, and that data key is wrapped by a key-encryption key (KEK) read from a key file
 * that is never in the database, so a copy of the database (a backup, a replica, a dump read by the
 * login role) holds no usable secret. The secret's ciphertext is bound to its tenant and member
 * (GCM's additional data): moved onto another member's row it does not open.
 *
 * Stored form: `v1.<kek id>.<wrapped data key>.<sealed secret>`, both parts base64url of
 * iv (12 bytes) | tag (16) | ciphertext. A base32 TOTP secret never contains a dot, so a value
 * without the `v1.` prefix is a secret stored in clear before encryption existed (see openSecret).
 *
 * The key file holds one key a line, `<id>:<base64 of 32 bytes>`; `#` starts a comment. The first
 * key seals; every key listed opens, so a rotation lists the new key first and keeps the old one
 * until nothing is sealed under it (docs/RUNBOOK.md).
 */
export interface MfaKeyRing {
  /** The file the keys came from (for messages; never the keys themselves). */
  path: string;
  activeId: string;
  keys: ReadonlyMap<string, Buffer>;
}

/** Which member a secret belongs to: its ciphertext opens only on that member's row. */
export interface SecretOwner {
  tenantId: string;
  userId: string;
}

const VERSION = 'v1';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_LINE = /^([A-Za-z0-9_-]{1,40}):([A-Za-z0-9+/]{43}=)$/;

const unavailable = (message: string) => new IdemError('MFA_KEY_UNAVAILABLE', message);

/** Reads and checks a key file. Missing, unreadable or malformed: MFA_KEY_UNAVAILABLE. */
export function readMfaKeyFile(path: string): MfaKeyRing {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw unavailable(`the TOTP key file ${path} cannot be read`);
  }
  const keys = new Map<string, Buffer>();
  let activeId: string | null = null;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match = KEY_LINE.exec(line);
    const [id, encoded] = [match?.[1], match?.[2]];
    if (!id || !encoded)
      throw unavailable(`the TOTP key file ${path} has a line that is not <id>:<base64 key>`);
    const key = Buffer.from(encoded, 'base64');
    if (key.length !== KEY_BYTES || keys.has(id))
      throw unavailable(`the TOTP key file ${path} has a key of the wrong size or a repeated id`);
    keys.set(id, key);
    activeId ??= id;
  }
  if (activeId === null) throw unavailable(`the TOTP key file ${path} holds no key`);
  return { path, activeId, keys };
}

/** A new key line: a random id and 32 random bytes. */
export function newMfaKeyLine(): string {
  return `${randomBytes(4).toString('hex')}:${randomBytes(KEY_BYTES).toString('base64')}`;
}

/**
 * The key file a development server or CLI uses when IDEM_MFA_KEY_FILE is unset: `mfa-kek.key` in
 * the data directory, made on first use (mode 0600). Made under a temporary name and linked into
 * place, so processes starting at once all end up reading the one file that won.
 */
export function developmentMfaKeyFile(dataDir: string): { path: string; created: boolean } {
  const path = join(dataDir, 'mfa-kek.key');
  if (existsSync(path)) return { path, created: false };
  mkdirSync(dataDir, { recursive: true });
  const temporary = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const descriptor = openSync(temporary, 'wx', 0o600);
  try {
    writeSync(
      descriptor,
      `# Idem TOTP key-encryption keys (development). The first key seals; every key opens.\n${newMfaKeyLine()}\n`,
    );
  } finally {
    closeSync(descriptor);
  }
  try {
    linkSync(temporary, path);
    return { path, created: true };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return { path, created: false };
    throw error;
  } finally {
    rmSync(temporary, { force: true });
  }
}

function encrypt(key: Buffer, plaintext: Buffer, aad: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
}

/** Null when the tag does not verify (wrong key, or the bytes or their binding changed). */
function decrypt(key: Buffer, encoded: string, aad: string): Buffer | null {
  const bytes = Buffer.from(encoded, 'base64url');
  if (bytes.length <= IV_BYTES + TAG_BYTES) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
  } catch {
    return null;
  }
}

const wrapAad = (keyId: string) => `idem-totp-data-key\n${keyId}`;
const sealAad = (owner: SecretOwner) => `idem-totp-secret\n${owner.tenantId}\n${owner.userId}`;

/** Encrypts a secret for its member under a fresh data key wrapped by the active KEK. */
export function sealSecret(ring: MfaKeyRing, owner: SecretOwner, secret: string): string {
  const kek = ring.keys.get(ring.activeId);
  if (!kek) throw unavailable(`the TOTP key file ${ring.path} has no active key`);
  const dataKey = randomBytes(KEY_BYTES);
  const wrapped = encrypt(kek, dataKey, wrapAad(ring.activeId));
  const sealed = encrypt(dataKey, Buffer.from(secret, 'utf8'), sealAad(owner));
  dataKey.fill(0);
  return `${VERSION}.${ring.activeId}.${wrapped}.${sealed}`;
}

export function isSealed(stored: string): boolean {
  return stored.startsWith(`${VERSION}.`);
}

/**
 * The secret a stored value holds, and whether it should be sealed again: it is in clear (stored
 * before encryption existed) or sealed under a key that is no longer the active one. A sealed value
 * that does not open (its key is not in the file, or the file's key is not the one it was sealed
 * under, or the bytes were changed or moved to another member) is MFA_KEY_UNAVAILABLE: nothing is
 * checked against a guess.
 */
export function openSecret(
  ring: MfaKeyRing,
  owner: SecretOwner,
  stored: string,
): { secret: string; reseal: boolean } {
  if (!isSealed(stored)) return { secret: stored, reseal: true };
  const [, keyId, wrapped, sealed, extra] = stored.split('.');
  if (!keyId || !wrapped || !sealed || extra !== undefined)
    throw unavailable('a stored TOTP secret is malformed');
  const kek = ring.keys.get(keyId);
  if (!kek)
    throw unavailable(
      `a TOTP secret is sealed under key ${keyId}, which the key file ${ring.path} does not hold`,
    );
  const dataKey = decrypt(kek, wrapped, wrapAad(keyId));
  const secret = dataKey ? decrypt(dataKey, sealed, sealAad(owner)) : null;
  dataKey?.fill(0);
  if (!secret)
    throw unavailable(
      `a TOTP secret does not open with key ${keyId} of the key file ${ring.path}: wrong key file`,
    );
  return { secret: secret.toString('utf8'), reseal: keyId !== ring.activeId };
}

/**
 * The key ring a server or CLI uses: IDEM_MFA_KEY_FILE when set (read now: a bad file stops the
 * start, not the first sign-in); otherwise in development the data directory's file, made on first
 * use (`created` says so, for the log); otherwise none, and every TOTP step is MFA_KEY_UNAVAILABLE.
 */
export function loadMfaKeys(options: {
  keyFile: string | undefined;
  dataDir: string;
  development: boolean;
}): {
  ring: MfaKeyRing | null;
  created: boolean;
} {
  if (options.keyFile) return { ring: readMfaKeyFile(options.keyFile), created: false };
  if (!options.development) return { ring: null, created: false };
  const { path, created } = developmentMfaKeyFile(options.dataDir);
  return { ring: readMfaKeyFile(path), created };
}

/** The ring, or MFA_KEY_UNAVAILABLE when this process has none configured. */
export function requireMfaKeys(ring: MfaKeyRing | null | undefined): MfaKeyRing {
  if (!ring) throw unavailable('no TOTP key file is configured (IDEM_MFA_KEY_FILE): TOTP cannot be used');
  return ring;
}
