/**
 * The TOTP budgets in the database itself (I31-MFA): 60 reservations at once, on a pool of real
 * connections, take exactly MFA_FAILURES_MAX slots; the rest are RATE_LIMITED with a wait, and a
 * session out of slots rolls its member's slot back. The counts are read from the rows.
 */
import { isIdemError } from '@idem/contracts';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { createTenant } from '../src/index.ts';
import { MFA_FAILURES_MAX, reserveMfaAttempt } from '../src/staff/mfa.ts';
import { openWebSession } from '../src/staff/sessions.ts';
import { createStaffUser } from '../src/staff/users.ts';

let database: TestDatabase;
let tenantId = '';

async function memberWithSessions(email: string, sessions: number) {
  return withTenant(database.db, tenantId, async (tx) => {
    const user = await createStaffUser(tx, { tenantId, email, role: 'approver', passwordHash: 'x' });
    const hashes: string[] = [];
    for (let index = 0; index < sessions; index += 1) {
      await openWebSession(tx, { tenantId, subject: { kind: 'staff', userId: user.userId }, ttlMs: 60_000 });
    }
    const rows = rowsOf<{ session_hash: string }>(
      await tx.execute(sql`select session_hash from web_sessions where user_id = ${user.userId}::uuid`),
    );
    hashes.push(...rows.map((row) => row.session_hash));
    return { userId: user.userId, hashes };
  });
}

async function counts(userId: string) {
  const [row] = rowsOf<{ member: number; sessions: string }>(
    await database.db.execute(sql`
      select u.mfa_failures as member, (select sum(s.mfa_failures) from web_sessions s
        where s.user_id = u.user_id)::text as sessions
      from staff_users u where u.user_id = ${userId}::uuid`),
  );
  return { member: row?.member, sessions: Number(row?.sessions) };
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 10 });
  tenantId = (await createTenant(database.db, { name: 'Budgets', mfaRequired: true })).tenantId;
});
afterAll(async () => database?.dispose());

describe('I31-MFA the budgets of codes hold in the database under concurrency', () => {
  it(`I31-MFA 60 reservations at once on one session take exactly ${MFA_FAILURES_MAX} slots`, async () => {
    const { userId, hashes } = await memberWithSessions('one@budgets.invalid', 1);
    const results = await Promise.allSettled(
      Array.from({ length: 60 }, () =>
        reserveMfaAttempt(database.db, { tenantId, userId, sessionHash: hashes[0] ?? null }),
      ),
    );
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(MFA_FAILURES_MAX);
    for (const result of results) {
      if (result.status === 'rejected') {
        expect(isIdemError(result.reason, 'RATE_LIMITED')).toBe(true);
        expect(result.reason.details.retryAfterMs).toBeGreaterThan(0);
      }
    }
    expect(await counts(userId)).toEqual({ member: MFA_FAILURES_MAX, sessions: MFA_FAILURES_MAX });
  });

  it(`I31-MFA 60 reservations at once over six sessions take exactly ${MFA_FAILURES_MAX} of the member's`, async () => {
    const { userId, hashes } = await memberWithSessions('six@budgets.invalid', 6);
    const results = await Promise.allSettled(
      Array.from({ length: 60 }, (_, index) =>
        reserveMfaAttempt(database.db, { tenantId, userId, sessionHash: hashes[index % 6] ?? null }),
      ),
    );
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(MFA_FAILURES_MAX);
    // A session refused after the member's slot was taken gave it back: the counts agree.
    expect(await counts(userId)).toEqual({ member: MFA_FAILURES_MAX, sessions: MFA_FAILURES_MAX });
  });
});
