import { IdemError } from '@idem/contracts';
import { and, eq, isNull, type SQL, sql } from 'drizzle-orm';
import type { Database, Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { staffUsers, webSessions } from '../db/schema/index.ts';
import { withTenant } from '../db/tenant-scope.ts';

/**
 * The stored side of staff TOTP (I14-MFA). The server computes and checks codes (it owns
 * the TOTP library); core keeps the state that makes them safe: a pending secret until a code
 * confirms it, the last accepted time step (a code of that step or earlier is a replay), hashed
 * one-time recovery codes, and two budgets of codes (the member's and each session's) from which a
 * slot is taken before any code is checked, so guessing is bounded even under concurrency.
 */

/** Failed codes allowed per member in one window, and the window. */
export const MFA_FAILURES_MAX = 5;
export const MFA_FAILURE_WINDOW_MS = 15 * 60_000;

export interface MfaRecord {
  secret: string | null;
  pendingSecret: string | null;
  lastStep: number | null;
}

/** Whether a budget's window has ended (or never started): the next slot starts a new one. */
const windowOver = (table: 'staff_users' | 'web_sessions') =>
  sql.raw(`(${table}.mfa_failures_reset_at is null or ${table}.mfa_failures_reset_at <= now())`);

/** The SET of a slot taken: one more in the window, or the first of a new one. */
const takeSlot = (table: 'staff_users' | 'web_sessions') => sql`
  mfa_failures = case when ${windowOver(table)} then 1 else ${sql.raw(table)}.mfa_failures + 1 end,
  mfa_failures_reset_at = case when ${windowOver(table)}
                               then now() + make_interval(secs => ${MFA_FAILURE_WINDOW_MS / 1000})
                               else ${sql.raw(table)}.mfa_failures_reset_at end`;

/** The WHERE that lets a slot be taken: the window is over, or it still has one free. */
const slotFree = (table: 'staff_users' | 'web_sessions') =>
  sql`(${windowOver(table)} or ${sql.raw(table)}.mfa_failures < ${MFA_FAILURES_MAX})`;

const tooManyCodes = (retryAfterMs: number) =>
  new IdemError('RATE_LIMITED', 'too many wrong codes; wait and try again', {
    retryAfterMs: Math.max(1, retryAfterMs),
  });

/**
 * Takes one slot of the member's budget and, with `sessionHash`, of that session's, BEFORE a code
 * is checked, and answers what the check needs. Each slot is one conditional UPDATE (the row lock
 * makes a concurrent one wait and re-read the count), and both commit together before the caller
 * checks anything, so however many codes arrive at once at most MFA_FAILURES_MAX per window are
 * ever checked. A slot stays taken whatever the check finds: a right code resets the counts
 * (acceptMfaStep, spendRecoveryCode, confirmMfaEnrolment). Out of slots: RATE_LIMITED with the
 * time until the window ends; nothing is taken.
 */
export async function reserveMfaAttempt(
  db: Database,
  input: { tenantId: string; userId: string; sessionHash: string | null },
): Promise<MfaRecord> {
  const { tenantId, userId, sessionHash } = input;
  return withTenant(db, tenantId, async (tx) => {
    const [member] = rowsOf<{ secret: string | null; pending: string | null; last_step: string | null }>(
      await tx.execute(sql`
        update staff_users set ${takeSlot('staff_users')}
        where tenant_id = ${tenantId}::uuid and user_id = ${userId}::uuid and disabled_at is null
          and ${slotFree('staff_users')}
        returning mfa_secret as secret, mfa_pending_secret as pending, mfa_last_step::text as last_step`),
    );
    if (!member) {
      const waitMs = await msUntilReset(
        tx,
        sql`staff_users where tenant_id = ${tenantId}::uuid
        and user_id = ${userId}::uuid and disabled_at is null`,
      );
      if (waitMs === null) throw new IdemError('UNAUTHORIZED', 'not signed in, or the session has ended');
      throw tooManyCodes(waitMs);
    }
    if (sessionHash !== null) {
      const taken = await tx.execute(sql`
        update web_sessions set ${takeSlot('web_sessions')}
        where tenant_id = ${tenantId}::uuid and session_hash = ${sessionHash} and ${slotFree('web_sessions')}
        returning 1`);
      // Throwing rolls back the member's slot too: a refused code takes nothing.
      if (rowsOf(taken).length === 0) {
        const waitMs = await msUntilReset(
          tx,
          sql`web_sessions where tenant_id = ${tenantId}::uuid
          and session_hash = ${sessionHash}`,
        );
        throw tooManyCodes(waitMs ?? MFA_FAILURE_WINDOW_MS);
      }
    }
    return {
      secret: member.secret,
      pendingSecret: member.pending,
      lastStep: member.last_step === null ? null : Number(member.last_step),
    };
  });
}

/** Milliseconds until the one row `from` names ends its window; null when there is no such row. */
async function msUntilReset(tx: Tx, from: SQL): Promise<number | null> {
  const [row] = rowsOf<{ wait_ms: string }>(
    await tx.execute(sql`
      select greatest(0, ceil(extract(epoch from coalesce(mfa_failures_reset_at, now()) - now()) * 1000))::bigint::text
             as wait_ms
      from ${from}`),
  );
  return row ? Number(row.wait_ms) : null;
}

/**
 * Whether a member uses TOTP and whether their tenant requires it of approvers, operators and
 * admins: what a check outside a web session (the CLI) needs to decide if a code is due.
 */
export async function mfaStateOf(
  tx: Tx,
  tenantId: string,
  userId: string,
): Promise<{ enrolled: boolean; tenantRequired: boolean }> {
  const [row] = rowsOf<{ enrolled: boolean; required: boolean }>(
    await tx.execute(sql`
      select u.mfa_enrolled_at is not null as enrolled, t.mfa_required as required
      from staff_users u join tenants t on t.tenant_id = u.tenant_id
      where u.tenant_id = ${tenantId}::uuid and u.user_id = ${userId}::uuid and u.disabled_at is null`),
  );
  if (!row) throw new IdemError('UNAUTHORIZED', 'wrong organisation, e-mail or password');
  return { enrolled: row.enrolled, tenantRequired: row.required };
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

/** Every stored TOTP secret of a tenant, pending or confirmed (for sealing them anew at rotation). */
export async function listMfaSecrets(
  tx: Tx,
  tenantId: string,
): Promise<{ userId: string; secret: string | null; pendingSecret: string | null }[]> {
  return tx
    .select({
      userId: staffUsers.userId,
      secret: staffUsers.mfaSecret,
      pendingSecret: staffUsers.mfaPendingSecret,
    })
    .from(staffUsers)
    .where(
      and(
        eq(staffUsers.tenantId, tenantId),
        sql`(${staffUsers.mfaSecret} is not null or ${staffUsers.mfaPendingSecret} is not null)`,
      ),
    )
    .orderBy(staffUsers.userId);
}

/**
 * Stores a secret sealed anew (under the current key, or for the first time when it was kept in
 * clear) in place of the value it was read as. Conditional on that value: an enrolment or another
 * reseal that changed the row meanwhile wins, and this one changes nothing.
 */
export async function resealMfaSecret(
  tx: Tx,
  input: { tenantId: string; userId: string; which: 'secret' | 'pending'; from: string; to: string },
): Promise<boolean> {
  const column = input.which === 'secret' ? staffUsers.mfaSecret : staffUsers.mfaPendingSecret;
  const updated = await tx
    .update(staffUsers)
    .set(input.which === 'secret' ? { mfaSecret: input.to } : { mfaPendingSecret: input.to })
    .where(
      and(
        eq(staffUsers.tenantId, input.tenantId),
        eq(staffUsers.userId, input.userId),
        eq(column, input.from),
      ),
    )
    .returning({ userId: staffUsers.userId });
  return updated.length > 0;
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
    sessionHash: string | null;
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
  input: { tenantId: string; userId: string; step: number; sessionHash: string | null },
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

/**
 * Marks the session verified and resets its own count of codes. Without a session (the CLI, where
 * each command is checked alone) there is nothing to mark: the time of the check is answered.
 */
async function markSessionVerified(
  tx: Tx,
  input: { tenantId: string; sessionHash: string | null },
): Promise<Date> {
  const { sessionHash } = input;
  if (sessionHash === null) return new Date();
  const [row] = await tx
    .update(webSessions)
    .set({ mfaAt: sql`now()`, mfaFailures: 0 })
    .where(and(eq(webSessions.tenantId, input.tenantId), eq(webSessions.sessionHash, sessionHash)))
    .returning({ mfaAt: webSessions.mfaAt });
  if (!row?.mfaAt) throw new IdemError('UNAUTHORIZED', 'not signed in, or the session has ended');
  return row.mfaAt;
}
