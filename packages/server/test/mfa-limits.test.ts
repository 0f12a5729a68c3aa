/**
 * The TOTP failure limit under concurrency, over real HTTP on the real server (I31-MFA). A code is
 * checked only after a failure slot was taken, in one statement, from both the member's budget
 * and the session's (five per 15 minutes each), so however many wrong codes arrive at once, at
 * most five are ever checked. What was checked is read from the audit log: every refused code is
 * one `staffAuth.mfaVerify` row, UNAUTHORIZED when it was checked and found wrong, RATE_LIMITED
 * when it was refused before any check.
 */
import type { StaffRole } from '@idem/contracts';
import { createStaffUser, createTenant, rowsOf, withTenant } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { startSilentServer } from './support/in-process.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';
import { totpDevice, wrongCodeFor } from './support/totp-device.ts';

const SLUG = 'limits-exchange';
const ATTEMPTS = 60;
const LIMIT = 5;
let database: TestDatabase;
let server: RunningServer;
let tenantId = '';
let base = '';
const http = staffHttp(() => base);

async function member(email: string, role: StaffRole): Promise<string> {
  const passwordHash = await hashPassword(PASSWORD);
  const user = await withTenant(database.db, tenantId, (tx) =>
    createStaffUser(tx, { tenantId, email, role, passwordHash }),
  );
  return user.userId;
}

const signIn = (email: string) => http.signIn({ tenantId, email, password: PASSWORD });

/** Enrols the member through the screens' procedures; answers their authenticator. */
async function enrol(session: StaffSession) {
  const started = await http.call('staffAuth.mfaEnrolStart', { mutation: true, session });
  const { secret } = dataOf<{ secret: string }>(started);
  const device = totpDevice(secret);
  const confirmed = await http.call('staffAuth.mfaEnrolConfirm', {
    mutation: true,
    session,
    input: { code: await device.next() },
  });
  expect(confirmed.status).toBe(200);
  return { secret, device };
}

const verify = (session: StaffSession, code: string) =>
  http.call('staffAuth.mfaVerify', { mutation: true, session, input: { code } });

/** The member's refused codes by outcome, from the audit log. */
async function refusals(userId: string): Promise<Record<string, number>> {
  const rows = rowsOf<{ outcome: string; count: string }>(
    await database.db.execute(sql`
      select outcome, count(*)::text as count from audit_log
      where tenant_id = ${tenantId}::uuid and actor = ${`staff:${userId}`}
        and action = 'staffAuth.mfaVerify' and outcome <> 'ok'
      group by outcome`),
  );
  return Object.fromEntries(rows.map((row) => [row.outcome, Number(row.count)]));
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 10 });
  tenantId = (await createTenant(database.db, { name: 'Limits', slug: SLUG })).tenantId;
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('I31-MFA the failure limit holds under concurrency', () => {
  it(`I31-MFA ${ATTEMPTS} wrong codes at once on one session: at most ${LIMIT} are checked, the rest refused unchecked`, async () => {
    const userId = await member('one-session@limits.invalid', 'approver');
    const { secret, device } = await enrol(await signIn('one-session@limits.invalid'));
    const session = await signIn('one-session@limits.invalid');
    const wrong = await wrongCodeFor(secret);

    const answers = await Promise.all(Array.from({ length: ATTEMPTS }, () => verify(session, wrong)));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 200)).toEqual([]);
    const seen = await refusals(userId);
    expect(seen.UNAUTHORIZED ?? 0).toBeGreaterThan(0);
    expect(seen.UNAUTHORIZED ?? 0).toBeLessThanOrEqual(LIMIT);
    expect((seen.UNAUTHORIZED ?? 0) + (seen.RATE_LIMITED ?? 0)).toBe(ATTEMPTS);
    expect(statuses.filter((status) => status === 401)).toHaveLength(seen.UNAUTHORIZED ?? 0);

    // The budget is spent: even the right code is refused now, unchecked.
    const right = await verify(session, await device.next());
    expect([right.status, right.body.error?.data.code]).toEqual([429, 'RATE_LIMITED']);
  });

  it(`I31-MFA ${ATTEMPTS} wrong codes at once spread over six sessions of one member: at most ${LIMIT} are checked`, async () => {
    const userId = await member('many-sessions@limits.invalid', 'operator');
    const { secret } = await enrol(await signIn('many-sessions@limits.invalid'));
    const sessions: StaffSession[] = [];
    for (let index = 0; index < 6; index += 1) sessions.push(await signIn('many-sessions@limits.invalid'));
    const wrong = await wrongCodeFor(secret);

    const answers = await Promise.all(
      Array.from({ length: ATTEMPTS }, (_, index) =>
        verify(sessions[index % sessions.length] as StaffSession, wrong),
      ),
    );
    expect(answers.filter((answer) => answer.status === 200)).toEqual([]);
    const seen = await refusals(userId);
    expect(seen.UNAUTHORIZED ?? 0).toBeGreaterThan(0);
    expect(seen.UNAUTHORIZED ?? 0).toBeLessThanOrEqual(LIMIT);
    expect((seen.UNAUTHORIZED ?? 0) + (seen.RATE_LIMITED ?? 0)).toBe(ATTEMPTS);
  });

  it('I31-MFA a right code in another session does not refill a guessing session: each session has its own budget too', async () => {
    const userId = await member('two-sessions@limits.invalid', 'admin');
    const { secret, device } = await enrol(await signIn('two-sessions@limits.invalid'));
    const guessing = await signIn('two-sessions@limits.invalid');
    const owner = await signIn('two-sessions@limits.invalid');
    const wrong = await wrongCodeFor(secret);

    for (let attempt = 0; attempt < LIMIT - 1; attempt += 1) {
      expect((await verify(guessing, wrong)).status).toBe(401);
    }
    // The member's own right code resets the member's count and its own session's, not the other's.
    expect((await verify(owner, await device.next())).status).toBe(200);
    expect((await verify(guessing, wrong)).status).toBe(401);
    const blocked = await verify(guessing, wrong);
    expect([blocked.status, blocked.body.error?.data.code]).toEqual([429, 'RATE_LIMITED']);
    // The owner's session still has its budget.
    expect((await verify(owner, wrong)).status).toBe(401);
    expect((await verify(owner, await device.next())).status).toBe(200);
    expect(await refusals(userId)).toEqual({ UNAUTHORIZED: LIMIT + 1, RATE_LIMITED: 1 });
  });
});
