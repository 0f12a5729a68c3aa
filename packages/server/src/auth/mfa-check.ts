import type { Database, MfaRecord } from '@idem/core';
import { acceptMfaStep, resealMfaSecret, reserveMfaAttempt, withTenant } from '@idem/core';
import type { Logger } from 'pino';
import { checkTotp } from './totp.ts';
import { type MfaKeyRing, openSecret, type SecretOwner, sealSecret } from './totp-secrets.ts';

/**
 * One code check, the same for the screens and the CLI: a slot of the member's budget (and of the
 * session's, when there is one) is taken first (reserveMfaAttempt), then the stored secrets are
 * opened with the key ring, then the code is compared. A secret found in clear, or sealed under a
 * key that is no longer the first of the file, is sealed again on this read, whatever the code.
 */
export interface OpenedMfa {
  /** The confirmed secret in clear, or null before enrolment. */
  secret: string | null;
  /** The pending secret in clear, and its stored form (what confirming compares against). */
  pendingSecret: string | null;
  storedPending: string | null;
  lastStep: number | null;
}

export async function reserveAndOpen(
  db: Database,
  ring: MfaKeyRing,
  input: SecretOwner & { sessionHash: string | null },
  log?: Logger,
): Promise<OpenedMfa> {
  const record: MfaRecord = await reserveMfaAttempt(db, input);
  const owner = { tenantId: input.tenantId, userId: input.userId };
  const secret = await openAndReseal(db, ring, owner, 'secret', record.secret, log);
  const pending = await openAndReseal(db, ring, owner, 'pending', record.pendingSecret, log);
  return {
    secret: secret?.secret ?? null,
    pendingSecret: pending?.secret ?? null,
    storedPending: pending?.stored ?? null,
    lastStep: record.lastStep,
  };
}

async function openAndReseal(
  db: Database,
  ring: MfaKeyRing,
  owner: SecretOwner,
  which: 'secret' | 'pending',
  stored: string | null,
  log?: Logger,
): Promise<{ secret: string; stored: string } | null> {
  if (stored === null) return null;
  const opened = openSecret(ring, owner, stored);
  if (!opened.reseal) return { secret: opened.secret, stored };
  const sealed = sealSecret(ring, owner, opened.secret);
  const replaced = await withTenant(db, owner.tenantId, (tx) =>
    resealMfaSecret(tx, { ...owner, which, from: stored, to: sealed }),
  );
  log?.info({ tenantId: owner.tenantId, userId: owner.userId, which, replaced }, 'TOTP secret sealed again');
  return { secret: opened.secret, stored: replaced ? sealed : stored };
}

/**
 * Checks a TOTP code against the member's confirmed secret and accepts its time step once
 * (acceptMfaStep, in `inTenant`'s transaction). Answers when it was verified, or null for a wrong,
 * replayed or absent code; throws RATE_LIMITED when the budget is spent (nothing checked) and
 * MFA_KEY_UNAVAILABLE when the secret does not open.
 */
export async function verifyMemberCode(
  db: Database,
  ring: MfaKeyRing,
  input: SecretOwner & { sessionHash: string | null; code: string },
  inTenant: <T>(work: (tx: Parameters<typeof acceptMfaStep>[0]) => Promise<T>) => Promise<T>,
  log?: Logger,
): Promise<Date | null> {
  const record = await reserveAndOpen(db, ring, input, log);
  if (!record.secret) return null;
  const step = await checkTotp(record.secret, input.code, record.lastStep);
  if (step === null) return null;
  const { tenantId, userId, sessionHash } = input;
  return inTenant((tx) => acceptMfaStep(tx, { tenantId, userId, sessionHash, step }));
}
