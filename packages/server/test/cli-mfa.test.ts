import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  confirmMfaEnrolment,
  createStaffUser,
  createTenant,
  listAudit,
  listMfaSecrets,
  startMfaEnrolment,
  withTenant,
} from '@idem/core';
import { generateSecret } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../src/auth/password.ts';
import { newMfaKeyLine, readMfaKeyFile, sealSecret } from '../src/auth/totp-secrets.ts';
import { idem } from './support/cli-process.ts';
import { ledgerOf, printed } from './support/cli-results.ts';
import {
  type Backend,
  backendKinds,
  createBackend,
  disposeBackend,
  withDirectDatabase,
} from './support/provision.ts';
import { totpDevice, wrongCodeFor } from './support/totp-device.ts';

interface PrintedProposal {
  proposal: { proposalId: string; state: string; payloadHash: string; approvalsGiven: number };
}

/**
 * The CLI's proposal commands ask a member who uses TOTP (or whose role must) for a code, as the
 * staff screens do (I31-MFA): without one, or with a wrong one, an approval or a rejection is
 * refused before anything is decided, and the refusal is audited; with the right one it goes
 * through. Members are enrolled as the screens enrol them (a secret sealed with the key file the
 * CLI is given); codes come from otplib, as from an authenticator app. One backend is enough here
 * (PostgreSQL when available): the check is the screens' own, tested on both in mfa-limits.
 */
const kind = backendKinds.at(-1) ?? 'pglite';

describe(`I31-MFA idem proposal asks for a TOTP code (${kind})`, () => {
  let backend: Backend;
  let tenantId = '';
  let keyDir = '';
  let keyFile = '';
  const password = 'correct horse battery staple';
  const users: Record<string, string> = {};
  const devices: Record<string, ReturnType<typeof totpDevice>> = {};
  const secrets: Record<string, string> = {};

  beforeAll(async () => {
    keyDir = mkdtempSync(join(tmpdir(), 'idem-cli-mfa-'));
    keyFile = join(keyDir, 'mfa.key');
    writeFileSync(keyFile, `${newMfaKeyLine()}\n`, { mode: 0o600 });
    const ring = readMfaKeyFile(keyFile);
    backend = await createBackend(kind);
    const passwordHash = await hashPassword(password);
    await withDirectDatabase(backend, async (db) => {
      ({ tenantId } = await createTenant(db, { name: 'CLI MFA Exchange', mfaRequired: true }));
      for (const role of ['operator', 'approver', 'admin'] as const) {
        const user = await withTenant(db, tenantId, (tx) =>
          createStaffUser(tx, { tenantId, email: `${role}@cli-mfa.invalid`, role, passwordHash }),
        );
        users[role] = user.userId;
      }
      // The operator and the approver enrol; the admin, whose role requires TOTP, has not.
      for (const role of ['operator', 'approver']) {
        const userId = users[role] ?? '';
        const secret = generateSecret();
        const sealed = sealSecret(ring, { tenantId, userId }, secret);
        const step = Math.floor(Date.now() / 30_000) - 2;
        await withTenant(db, tenantId, async (tx) => {
          await startMfaEnrolment(tx, { tenantId, userId, secret: sealed });
          await confirmMfaEnrolment(tx, {
            tenantId,
            userId,
            secret: sealed,
            step,
            recoveryHashes: [],
            sessionHash: null,
          });
        });
        secrets[role] = secret;
        devices[role] = totpDevice(secret, { fresh: true });
      }
    });
  });
  afterAll(async () => {
    if (backend) await disposeBackend(backend);
    if (backend?.kind === 'pglite') rmSync(backend.dataDir, { recursive: true, force: true });
    if (keyDir) rmSync(keyDir, { recursive: true, force: true });
  });

  const as = (role: string, extra: Record<string, string>, ...args: string[]) =>
    idem(
      { ...backend.env, IDEM_STAFF_PASSWORD: password, IDEM_MFA_KEY_FILE: keyFile, ...extra },
      'proposal',
      ...args,
      '--tenant',
      tenantId,
      '--as',
      `${role}@cli-mfa.invalid`,
    );
  const code = async (role: string) => (await devices[role]?.next()) ?? '';

  async function propose(reference: string): Promise<PrintedProposal['proposal']> {
    const proposed = printed<PrintedProposal>(
      await as(
        'operator',
        {},
        ...['credit', '--account', 'cust-mfa', '--asset', 'ETH', '--amount', '700'],
        ...['--reference', reference, '--reason', 'lost webhook, ticket 31', '--key', reference],
        ...['--code', await code('operator'), '--json'],
      ),
    );
    expect(proposed.proposal.state).toBe('PENDING');
    return proposed.proposal;
  }

  it('I31-MFA approve is refused without a code and with a wrong one, accepted with the right one', async () => {
    const { proposalId, payloadHash } = await propose('cli-mfa-1');
    const approve = ['approve', '--id', proposalId, '--hash', payloadHash];
    const before = await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-mfa'));

    const none = await as('approver', {}, ...approve);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^idem: MFA_REQUIRED: /);
    const wrong = await as('approver', {}, ...approve, '--code', await wrongCodeFor(secrets.approver ?? ''));
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^idem: UNAUTHORIZED: that code is not valid/);
    // An admin whose role requires TOTP but who never enrolled cannot decide from the CLI either.
    const notEnrolled = await as('admin', { IDEM_STAFF_TOTP: '123456' }, ...approve);
    expect(notEnrolled.stderr).toMatch(/^idem: MFA_REQUIRED: set up an authenticator/);
    expect(await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-mfa'))).toEqual(before);

    const right = await as('approver', { IDEM_STAFF_TOTP: await code('approver') }, ...approve, '--json');
    expect(printed<PrintedProposal>(right).proposal).toMatchObject({ state: 'EXECUTED', approvalsGiven: 1 });
    expect(await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-mfa'))).toMatchObject({
      balances: [{ asset: 'ETH', available: '700', held: '0' }],
    });

    const audit = await withDirectDatabase(backend, (db) =>
      withTenant(db, tenantId, (tx) => listAudit(tx, tenantId, { limit: 100 })),
    );
    const approvals = audit.items
      .filter((entry) => entry.action === 'cli:proposal approve')
      .map((entry) => `${entry.actor} ${entry.outcome}`)
      .reverse();
    expect(approvals).toEqual([
      `staff:${users.approver} MFA_REQUIRED`,
      `staff:${users.approver} UNAUTHORIZED`,
      `staff:${users.admin} MFA_REQUIRED`,
      `staff:${users.approver} ok`,
    ]);
  });

  it('I31-MFA reject is refused with a wrong code and a replayed one, accepted with a fresh right one', async () => {
    const { proposalId, payloadHash } = await propose('cli-mfa-2');
    const reject = ['reject', '--id', proposalId, '--hash', payloadHash, '--reason', 'no ticket found'];
    const wrong = await as('approver', {}, ...reject, '--code', await wrongCodeFor(secrets.approver ?? ''));
    expect(wrong.stderr).toMatch(/^idem: UNAUTHORIZED: /);
    const fresh = await code('approver');
    const rejected = await as('approver', {}, ...reject, '--code', fresh, '--json');
    expect(printed<PrintedProposal>(rejected).proposal.state).toBe('REJECTED');
    // The same code again is a replay of its time step.
    const replay = await as('approver', {}, 'show', '--id', proposalId, '--code', fresh);
    expect(replay.stderr).toMatch(/^idem: UNAUTHORIZED: /);
  });

  it('I31-MFA rotation: idem mfa reseal seals every secret under the new first key, so the old line can go', async () => {
    const oldLine = readFileSync(keyFile, 'utf8').trim();
    const newLine = newMfaKeyLine();
    const newId = newLine.split(':')[0] ?? '';
    const rotated = join(keyDir, 'rotated.key');
    writeFileSync(rotated, `${newLine}\n${oldLine}\n`, { mode: 0o600 });
    const reseal = (file: string) =>
      idem({ ...backend.env, IDEM_MFA_KEY_FILE: file }, 'mfa', 'reseal', '--tenant', tenantId, '--json');

    const first = printed<{ keyId: string; resealed: number; current: number; unopened: string[] }>(
      await reseal(rotated),
    );
    expect(first).toMatchObject({ keyId: newId, resealed: 2, current: 0, unopened: [] });
    const keyIds = await withDirectDatabase(backend, (db) =>
      withTenant(db, tenantId, async (tx) =>
        (await listMfaSecrets(tx, tenantId)).map((row) => row.secret?.split('.')[1]),
      ),
    );
    expect(keyIds).toEqual([newId, newId]);
    // With only the new line left, everything still opens.
    const newOnly = join(keyDir, 'new-only.key');
    writeFileSync(newOnly, `${newLine}\n`, { mode: 0o600 });
    expect(printed(await reseal(newOnly))).toMatchObject({ resealed: 0, current: 2, unopened: [] });
    // The old file alone opens nothing now: each member is named, nothing is changed.
    const stale = printed<{ unopened: string[] }>(await reseal(keyFile));
    expect(stale.unopened.sort()).toEqual([users.operator, users.approver].sort());
  });
});
