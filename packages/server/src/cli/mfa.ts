import { IdemError } from '@idem/contracts';
import {
  type Database,
  listMfaSecrets,
  mfaStateOf,
  resealMfaSecret,
  type StaffUser,
  withTenant,
} from '@idem/core';
import { verifyMemberCode } from '../auth/mfa-check.ts';
import {
  loadMfaKeys,
  type MfaKeyRing,
  openSecret,
  requireMfaKeys,
  sealSecret,
} from '../auth/totp-secrets.ts';
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
  const verifiedAt = await verifyMemberCode(
    db,
    cliMfaKeys(env),
    { tenantId, userId, sessionHash: null, code },
    (work) => withTenant(db, tenantId, work),
  );
  if (!verifiedAt) throw wrongCode();
}

const wrongCode = () =>
  new IdemError('UNAUTHORIZED', 'that code is not valid (wrong, expired or already used)');

/** The CLI's key ring, as the server finds it (env.ts IDEM_MFA_KEY_FILE; development's own file). */
function cliMfaKeys(env: Env): MfaKeyRing {
  const { ring, created } = loadMfaKeys({
    keyFile: env.IDEM_MFA_KEY_FILE,
    dataDir: env.IDEM_DATA_DIR,
    development: isDevelopment(env, { embedded: !env.DATABASE_URL }),
  });
  if (ring && created) process.stderr.write(`idem: made a TOTP key file for development at ${ring.path}\n`);
  return requireMfaKeys(ring);
}

/**
 * `idem mfa reseal --tenant ID`: seals every TOTP secret of the tenant that is in clear, or sealed
 * under a key other than the key file's first, under that first key (a rotation's last step
 * before the old key line is removed; docs/RUNBOOK.md). Each replacement is conditional on the
 * value read. A secret that does not open is counted, never changed: the answer names its member.
 */
export async function resealTenantSecrets(db: Database, env: Env, tenantId: string) {
  const ring = cliMfaKeys(env);
  const rows = await withTenant(db, tenantId, (tx) => listMfaSecrets(tx, tenantId));
  let resealed = 0;
  let current = 0;
  const unopened: string[] = [];
  for (const row of rows) {
    const owner = { tenantId, userId: row.userId };
    for (const [which, stored] of [
      ['secret', row.secret],
      ['pending', row.pendingSecret],
    ] as const) {
      if (stored === null) continue;
      let opened: ReturnType<typeof openSecret>;
      try {
        opened = openSecret(ring, owner, stored);
      } catch {
        unopened.push(row.userId);
        continue;
      }
      if (!opened.reseal) {
        current += 1;
        continue;
      }
      const to = sealSecret(ring, owner, opened.secret);
      const replaced = await withTenant(db, tenantId, (tx) =>
        resealMfaSecret(tx, { ...owner, which, from: stored, to }),
      );
      if (replaced) resealed += 1;
    }
  }
  return { tenantId, keyId: ring.activeId, resealed, current, unopened };
}
