import { IdemError } from '@idem/contracts';
import { and, eq, isNull, sql } from 'drizzle-orm';
import { actAsAppRole } from '../db/app-role.ts';
import type { Database, Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { staffUsers, webSessions } from '../db/schema/index.ts';

/**
 * The stored side of staff TOTP (I14-MFA). The server computes and checks codes (it owns
 * the TOTP library); core keeps the state that makes them safe: a pending secret until a code
 * confirms it, the last accepted time step (a code of that step or earlier is a replay), hashed
 * one-time recovery codes, and a failure counter that throttles guessing.
 */

/** Failed codes allowed per member in one window, and the window. */
export const MFA_FAILURES_MAX = 5;
export const MFA_FAILURE_WINDOW_MS = 15 * 60_000;

export interface MfaRecord {
  secret: string | null;
  pendingSecret: string | null;
  lastStep: number | null;
  /** Milliseconds until a code may be tried again; 0 when the member is not throttled. */
  blockedForMs: number;
}

export async function readMfa(tx: Tx, tenantId: string, userId: string): Promise<MfaRecord> {
  const [row] = rowsOf<{
    secret: string | null;
    pending: string | null;
    last_step: string | null;
    blocked_ms: string | null;
  }>(
    await tx.execute(sql`
      select mfa_secret as secret, mfa_pending_secret as pending, mfa_last_step::text as last_step,
             case when mfa_failures >= ${MFA_FAILURES_MAX} and mfa_failures_reset_at > now()
                  then ceil(extract(epoch from mfa_failures_reset_at - now()) * 1000)::bigint::text
                  else '0' end as blocked_ms
      from staff_users where tenant_id = ${tenantId}::uuid and user_id = ${userId}::uuid`),
  );
  if (!row) throw new IdemError('UNAUTHORIZED', 'not signed in, or the session has ended');
  return {
    secret: row.secret,
    pendingSecret: row.pending,
    lastStep: row.last_step === null ? null : Number(row.last_step),
    blockedForMs: Number(row.blocked_ms ?? 0),
  };
}

/** Keeps a new secret pending; refused when the member has enrolled already (the secret is never shown again). */
export async function startMfaEnrolment(tx: Tx, input: { tenantId: string; userId: string; secret: string }) {
  const updated = await tx
    .update(staffUsers)
    .set({ mfaPendingSecret: input.secret })
    .where(
      and(
        eq(staffUsers.tenantId, input.tenantId),
        eq(staffUsers.userId, input.userId),
        isNull(staffUsers.mfaSecret),
      ),
    )
    .returning({ userId: staffUsers.userId });
  if (updated.length === 0)
    throw new IdemError('IDEMPOTENCY_CONFLICT', 'authentication is already set up for this staff member');
}

/**
 * Confirms the pending secret with the step of a code the server checked against it, stores the
 * recovery codes' hashes and marks the session verified. One conditional UPDATE: a pending secret
 * replaced meanwhile (enrolment started again elsewhere) confirms nothing.
 */
export async function confirmMfaEnrolment(
  tx: Tx,
  input: {
    tenantId: string;
    userId: string;
    secret: string;
    step: number;
    recoveryHashes: string[];
    sessionHash: string;
  },
): Promise<Date> {
  const updated = await tx
    .update(staffUsers)
    .set({
      mfaSecret: input.secret,
      mfaPendingSecret: null,
      mfaEnrolledAt: sql`now()`,
      mfaLastStep: input.step,
      mfaRecoveryHashes: input.recoveryHashes,
      mfaFailures: 0,
    })
    .where(
      and(
        eq(staffUsers.tenantId, input.tenantId),
        eq(staffUsers.userId, input.userId),
        isNull(staffUsers.mfaSecret),
        eq(staffUsers.mfaPendingSecret, input.secret),
      ),
    )
    .returning({ userId: staffUsers.userId });
  if (updated.length === 0)
    throw new IdemError('IDEMPOTENCY_CONFLICT', 'this enrolment was replaced or completed; start again');
  return markSessionVerified(tx, input);
}

/**
 * Accepts a checked code's time step once: the UPDATE succeeds only for a step after the last one
 * accepted, so two sessions racing with one code get one success. False means a replay.
 */
export async function acceptMfaStep(
  tx: Tx,
  input: { tenantId: string; userId: string; step: number; sessionHash: string },
): Promise<Date | null> {
  const updated = await tx
    .update(staffUsers)
    .set({ mfaLastStep: input.step, mfaFailures: 0 })
    .where(
      and(
        eq(staffUsers.tenantId, input.tenantId),
        eq(staffUsers.userId, input.userId),
        sql`${staffUsers.mfaSecret} is not null`,
        sql`(${staffUsers.mfaLastStep} is null or ${staffUsers.mfaLastStep} < ${input.step})`,
      ),
    )
    .returning({ userId: staffUsers.userId });
  return updated.length === 0 ? null : markSessionVerified(tx, input);
}

/** Spends one recovery code (by its hash), once: the UPDATE removes it only if it is still there. */
export async function spendRecoveryCode(
  tx: Tx,
  input: { tenantId: string; userId: string; codeHash: string; sessionHash: string },
): Promise<Date | null> {
  const updated = await tx
    .update(staffUsers)
    .set({
      mfaRecoveryHashes: sql`array_remove(${staffUsers.mfaRecoveryHashes}, ${input.codeHash})`,
      mfaFailures: 0,
    })
    .where(
      and(
        eq(staffUsers.tenantId, input.tenantId),
        eq(staffUsers.userId, input.userId),
        sql`${staffUsers.mfaSecret} is not null`,
        sql`${input.codeHash} = any(${staffUsers.mfaRecoveryHashes})`,
      ),
    )
    .returning({ userId: staffUsers.userId });
  return updated.length === 0 ? null : markSessionVerified(tx, input);
}

async function markSessionVerified(tx: Tx, input: { tenantId: string; sessionHash: string }): Promise<Date> {
  const [row] = await tx
    .update(webSessions)
    .set({ mfaAt: sql`now()` })
    .where(and(eq(webSessions.tenantId, input.tenantId), eq(webSessions.sessionHash, input.sessionHash)))
    .returning({ mfaAt: webSessions.mfaAt });
  if (!row?.mfaAt) throw new IdemError('UNAUTHORIZED', 'not signed in, or the session has ended');
  return row.mfaAt;
}

/**
 * Counts a failed code in its own transaction (the refused request rolls its own back). The window
 * starts at the first failure and is never extended by later ones, so waiting it out always works.
 */
export async function recordMfaFailure(db: Database, tenantId: string, userId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await actAsAppRole(tx, tenantId);
    await tx.execute(sql`
      update staff_users set
        mfa_failures = case when mfa_failures_reset_at is null or mfa_failures_reset_at <= now()
                            then 1 else mfa_failures + 1 end,
        mfa_failures_reset_at = case when mfa_failures_reset_at is null or mfa_failures_reset_at <= now()
                                     then now() + make_interval(secs => ${MFA_FAILURE_WINDOW_MS / 1000})
                                     else mfa_failures_reset_at end
      where tenant_id = ${tenantId}::uuid and user_id = ${userId}::uuid`);
  });
}
