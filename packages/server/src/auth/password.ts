import { hash, verify } from '@node-rs/argon2';

/**
 * argon2id with OWASP's recommended floor (19 MiB, 2 passes, 1 lane). The PHC string stores the
 * parameters, so raising them later still verifies old hashes.
 */
const ARGON2ID = 2; // Algorithm.Argon2id: a const enum, which isolated modules cannot import.
const OPTIONS = { algorithm: ARGON2ID, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export const PASSWORD_LENGTH_MIN = 12;

export function hashPassword(password: string): Promise<string> {
  if (password.length < PASSWORD_LENGTH_MIN) {
    throw new Error(`a staff password needs at least ${PASSWORD_LENGTH_MIN} characters`);
  }
  return hash(password, OPTIONS);
}

/** A hash of nothing in particular, verified when the e-mail is unknown so timing tells nothing. */
let decoy: Promise<string> | null = null;

export async function verifyPassword(storedHash: string | null, password: string): Promise<boolean> {
  if (storedHash === null) {
    decoy ??= hash('decoy-password-never-matches', OPTIONS);
    await verify(await decoy, password).catch(() => false);
    return false;
  }
  return verify(storedHash, password).catch(() => false);
}
