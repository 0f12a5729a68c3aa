import { IdemError } from '@idem/contracts';
import { type Database, mfaStateOf, type StaffUser, withTenant } from '@idem/core';
import { verifyMemberCode } from '../auth/mfa-check.ts';
import { loadMfaKeys, requireMfaKeys } from '../auth/totp-secrets.ts';
import { type Env, isDevelopment } from '../env.ts';
import { readPassword } from './read-password.ts';

type Flags = Record<string, string | boolean | undefined>;

/**
 * The second factor of a CLI sign-in, as the staff screens ask it: a member who uses TOTP, or whose
 * tenant requires it of their role (approver, operator, admin), gives a code from their
 * authenticator with every command (`--code`, IDEM_STAFF_TOTP, or typed at the prompt). Each
 * command is a sign-in of its own, so the code is always fresh, as step-up requires. The code is
 * checked as the screens check it (auth/mfa-check.ts): a slot of the member's budget first, once
 * per time step. A member whose role requires TOTP but who has not enrolled is refused
 * (MFA_REQUIRED): enrolment happens in the staff screens, where the secret can be shown.
 */
export async function requireCliCode(db: Database, env: Env, user: StaffUser, flags: Flags): Promise<void> {
  const { tenantId, userId } = user;
  const state = await withTenant(db, tenantId, (tx) => mfaStateOf(tx, tenantId, userId));
  const required = state.enrolled || (state.tenantRequired && user.role !== 'support');
  if (!required) return;
  if (!state.enrolled)
    throw new IdemError(
      'MFA_REQUIRED',
      'set up an authenticator in the staff screens first (your role requires it)',
    );
  const code = (
    typeof flags.code === 'string'
      ? flags.code
      : (env.IDEM_STAFF_TOTP ?? (await readPassword(`Authenticator code for ${user.email}: `)))
  ).trim();
  if (code === '')
    throw new IdemError(
      'MFA_REQUIRED',
      'a code from your authenticator is required (--code or IDEM_STAFF_TOTP)',
    );
  if (!/^\d{6}$/.test(code)) throw wrongCode();
  const { ring, created } = loadMfaKeys({
    keyFile: env.IDEM_MFA_KEY_FILE,
    dataDir: env.IDEM_DATA_DIR,
    development: isDevelopment(env, { embedded: !env.DATABASE_URL }),
  });
  if (ring && created) process.stderr.write(`idem: made a TOTP key file for development at ${ring.path}\n`);
  const verifiedAt = await verifyMemberCode(
    db,
    requireMfaKeys(ring),
    { tenantId, userId, sessionHash: null, code },
    (work) => withTenant(db, tenantId, work),
  );
  if (!verifiedAt) throw wrongCode();
}

const wrongCode = () =>
  new IdemError('UNAUTHORIZED', 'that code is not valid (wrong, expired or already used)');
