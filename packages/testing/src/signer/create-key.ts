/**
 * Generates a hot-wallet key in a SoftHSM2 token and prints `{ keyRef, address }` as JSON. Run as a
 * child by `tokenKey`: a process initialises its PKCS#11 module once, with the SoftHSM2
 * configuration of that moment, so a test process that shares its modules between files (vitest's
 * isolate off) must not open a second file's token itself (CKR_GENERAL_ERROR).
 */
import { createPkcs11Key } from '@idem/rails';

const [modulePath, tokenLabel, pinVariable, label] = process.argv.slice(2);
if (!modulePath || !tokenLabel || !pinVariable || !label) {
  throw new Error('usage: create-key.ts <modulePath> <tokenLabel> <pinVariable> <label>');
}
const key = await createPkcs11Key({ modulePath, tokenLabel, pinRef: `env:${pinVariable}`, label });
process.stdout.write(`${JSON.stringify(key)}\n`);
