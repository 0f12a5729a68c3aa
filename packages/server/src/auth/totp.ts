import { createHash, randomBytes } from 'node:crypto';
import { generateSecret, generateURI, verify } from 'otplib';
import QRCode from 'qrcode';

/**
 * TOTP (RFC 6238) with the authenticator apps' defaults: SHA-1, 6 digits, 30-second steps. A code
 * of the previous, current or next step is accepted (clock drift of up to 30 s either way), and
 * only for a step after the last one accepted (otplib's `afterTimeStep`), so a code cannot be
 * replayed within its window.
 */
const ISSUER = 'Idem';
const STEP_TOLERANCE_SECONDS = 30;

export function newTotpSecret(): string {
  return generateSecret();
}

export async function enrolmentOf(secret: string, account: string) {
  const otpauthUrl = generateURI({ issuer: ISSUER, label: account, secret });
  // A PNG data URL: the page's CSP allows `img-src data:`; nothing is fetched from elsewhere.
  const qrDataUrl = await QRCode.toDataURL(otpauthUrl, { errorCorrectionLevel: 'M', margin: 1, width: 200 });
  return { secret, otpauthUrl, qrDataUrl };
}

/** The time step the code belongs to, or null (wrong, or at/before `afterStep`). */
export async function checkTotp(
  secret: string,
  code: string,
  afterStep: number | null,
): Promise<number | null> {
  const result = await verify({
    secret,
    token: code,
    epochTolerance: STEP_TOLERANCE_SECONDS,
    ...(afterStep === null ? {} : { afterTimeStep: afterStep }),
  }).catch(() => null);
  return result?.valid && 'timeStep' in result ? result.timeStep : null;
}

/** Ten recovery codes of 50 random bits each, shown as `xxxxx-xxxxx` (base32, lower case). */
export function newRecoveryCodes(): string[] {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  return Array.from({ length: 10 }, () => {
    const bytes = randomBytes(10);
    const chars = Array.from(bytes, (byte) => alphabet[byte % 32]).join('');
    return `${chars.slice(0, 5)}-${chars.slice(5)}`;
  });
}

/**
 * What is stored of a recovery code: its SHA-256 after normalising (no separators, lower case).
 * 50 random bits and single use make a slow hash unnecessary; the failure throttle bounds guessing.
 */
export function recoveryCodeHash(code: string): string {
  return createHash('sha256')
    .update(`idem-recovery\n${code.replace(/[\s-]/g, '').toLowerCase()}`)
    .digest('hex');
}
