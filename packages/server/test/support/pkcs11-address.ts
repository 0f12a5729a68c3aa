/**
 * Prints the address of the key a `pkcs11:` key reference names, opened in this process. Run as a
 * child (`pkcs11Address`): a process initialises its PKCS#11 module once, with the SoftHSM2
 * configuration of that moment, so a test process whose files share it (vitest's isolate off) must
 * not open a second token itself.
 */
import { openPkcs11Signer } from '@idem/rails';

const keyRef = process.argv[2];
if (!keyRef) throw new Error('usage: pkcs11-address.ts <keyRef>');
process.stdout.write(`${openPkcs11Signer(keyRef).address}\n`);
