/**
 * TOTP secrets at rest (I31-MFA): sealed with AES-256-GCM under a data key of their own, wrapped by
 * a key from a key file outside the database. Proven over real HTTP on the real server: the row
 * holds no secret in clear, sign-in with a code still works end to end, a secret kept in clear
 * before encryption is read once and sealed on that read, a server given the wrong key file
 * refuses with MFA_KEY_UNAVAILABLE (nothing is checked), and a rotated file reseals under its new
 * first key.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IdemError } from '@idem/contracts';
import { createStaffUser, createTenant, rowsOf, withTenant } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { newMfaKeyLine, openSecret, readMfaKeyFile, sealSecret } from '../src/auth/totp-secrets.ts';
import { startSilentServer } from './support/in-process.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp, type TrpcAnswer } from './support/staff-http.ts';
import { totpDevice } from './support/totp-device.ts';

let database: TestDatabase;
let server: RunningServer;
let tenantId = '';
let base = '';
let keyDir = '';
const firstKey = newMfaKeyLine();
const http = staffHttp(() => base);

const keyFile = (name: string, ...lines: string[]) => {
  const path = join(keyDir, name);
  writeFileSync(path, `${lines.join('\n')}\n`, { mode: 0o600 });
  return path;
};
const errorCode = (answer: TrpcAnswer) => answer.body.error?.data.code;

async function member(email: string): Promise<string> {
  const passwordHash = await hashPassword(PASSWORD);
  const user = await withTenant(database.db, tenantId, (tx) =>
    createStaffUser(tx, { tenantId, email, role: 'approver', passwordHash }),
  );
  return user.userId;
}

const signIn = (email: string) => http.signIn({ tenantId, email, password: PASSWORD });

async function storedSecrets(userId: string) {
  const [row] = rowsOf<{ secret: string | null; pending: string | null }>(
    await database.db.execute(sql`
      select mfa_secret as secret, mfa_pending_secret as pending from staff_users
      where tenant_id = ${tenantId}::uuid and user_id = ${userId}::uuid`),
  );
  return row;
}

async function enrol(session: StaffSession, userId: string) {
  const started = await http.call('staffAuth.mfaEnrolStart', { mutation: true, session });
  const { secret } = dataOf<{ secret: string }>(started);
  // While pending, too, only the sealed form is stored.
  const pending = (await storedSecrets(userId))?.pending ?? '';
  expect(pending).toMatch(/^v1\./);
  expect(pending).not.toContain(secret);
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

beforeAll(async () => {
  keyDir = mkdtempSync(join(tmpdir(), 'idem-mfa-keys-'));
  database = await createTestDatabase({ maxConnections: 5 });
  tenantId = (await createTenant(database.db, { name: 'Sealed', slug: 'sealed-exchange' })).tenantId;
  ({ server, base } = await startSilentServer(database, {
    IDEM_MFA_KEY_FILE: keyFile('first.key', firstKey),
  }));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
  if (keyDir) rmSync(keyDir, { recursive: true, force: true });
});

describe('I31-MFA TOTP secrets are sealed at rest by a key outside the database', () => {
  it('I31-MFA the row holds no secret in clear, and sign-in with a code still works end to end', async () => {
    const userId = await member('sealed@sealed.invalid');
    const { secret, device } = await enrol(await signIn('sealed@sealed.invalid'), userId);
    const stored = await storedSecrets(userId);
    expect(stored?.pending).toBeNull();
    expect(stored?.secret).toMatch(/^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(stored?.secret).not.toContain(secret);
    // Nor anywhere else in the member's row, in any encoding a reader might try.
    const [row] = rowsOf<{ whole: string }>(
      await database.db.execute(
        sql`select row_to_json(u)::text as whole from staff_users u where user_id = ${userId}::uuid`,
      ),
    );
    for (const form of [secret, secret.toLowerCase(), Buffer.from(secret).toString('base64')]) {
      expect(row?.whole).not.toContain(form);
    }

    const later = await signIn('sealed@sealed.invalid');
    expect(errorCode(await http.call('staff.approvals', { session: later, input: {} }))).toBe('MFA_REQUIRED');
    expect((await verify(later, await device.next())).status).toBe(200);
    expect((await http.call('staff.approvals', { session: later, input: {} })).status).toBe(200);
  });

  it('I31-MFA a secret stored in clear before encryption is read once and sealed on that read', async () => {
    const userId = await member('legacy@sealed.invalid');
    const { secret, device } = await enrol(await signIn('legacy@sealed.invalid'), userId);
    // As a row written before secrets were sealed.
    await database.db.execute(
      sql`update staff_users set mfa_secret = ${secret} where user_id = ${userId}::uuid`,
    );

    const session = await signIn('legacy@sealed.invalid');
    expect((await verify(session, await device.next())).status).toBe(200);
    const resealed = (await storedSecrets(userId))?.secret ?? '';
    expect(resealed).toMatch(/^v1\./);
    expect(resealed).not.toContain(secret);
    expect((await verify(await signIn('legacy@sealed.invalid'), await device.next())).status).toBe(200);
  });

  it('I31-MFA a server with the wrong key file fails closed with MFA_KEY_UNAVAILABLE; the session stays unverified', async () => {
    const userId = await member('wrong-key@sealed.invalid');
    const { device } = await enrol(await signIn('wrong-key@sealed.invalid'), userId);
    // The same key id with other bytes, and another id altogether: neither opens the secret.
    const id = firstKey.split(':')[0] ?? '';
    const impostor = `${id}:${newMfaKeyLine().split(':')[1]}`;
    for (const file of [keyFile('impostor.key', impostor), keyFile('other.key', newMfaKeyLine())]) {
      const wrong = await startSilentServer(database, { IDEM_MFA_KEY_FILE: file });
      try {
        const wrongHttp = staffHttp(() => wrong.base);
        const session = await wrongHttp.signIn({
          tenantId,
          email: 'wrong-key@sealed.invalid',
          password: PASSWORD,
        });
        const refused = await wrongHttp.call('staffAuth.mfaVerify', {
          mutation: true,
          session,
          input: { code: await device.next() },
        });
        expect([refused.status, errorCode(refused)]).toEqual([503, 'MFA_KEY_UNAVAILABLE']);
        const blocked = await wrongHttp.call('staff.approvals', { session, input: {} });
        expect(errorCode(blocked)).toBe('MFA_REQUIRED');
      } finally {
        await wrong.server.close();
      }
    }
    // The typed error, and a sealed value moved onto another member's row does not open either.
    const ring = readMfaKeyFile(join(keyDir, 'first.key'));
    const sealed = sealSecret(ring, { tenantId, userId }, 'JBSWY3DPEHPK3PXP');
    expect(openSecret(ring, { tenantId, userId }, sealed)).toEqual({
      secret: 'JBSWY3DPEHPK3PXP',
      reseal: false,
    });
    const moved = (() => {
      try {
        return openSecret(ring, { tenantId, userId: crypto.randomUUID() }, sealed);
      } catch (error) {
        return error;
      }
    })();
    expect(moved).toBeInstanceOf(IdemError);
    expect((moved as IdemError).code).toBe('MFA_KEY_UNAVAILABLE');
  });

  it('I31-MFA a server refuses to start on a key file it cannot read or parse', async () => {
    for (const file of [join(keyDir, 'absent.key'), keyFile('garbage.key', 'not a key')]) {
      await expect(startSilentServer(database, { IDEM_MFA_KEY_FILE: file })).rejects.toMatchObject({
        code: 'MFA_KEY_UNAVAILABLE',
      });
    }
  });

  it('I31-MFA rotation: with a new first key, a code still works and the secret is sealed again under it', async () => {
    const userId = await member('rotated@sealed.invalid');
    const { device } = await enrol(await signIn('rotated@sealed.invalid'), userId);
    const newKey = newMfaKeyLine();
    const rotated = await startSilentServer(database, {
      IDEM_MFA_KEY_FILE: keyFile(
        'rotated.key',
        '# new key first; the old one opens what it sealed',
        newKey,
        firstKey,
      ),
    });
    try {
      const rotatedHttp = staffHttp(() => rotated.base);
      const session = await rotatedHttp.signIn({
        tenantId,
        email: 'rotated@sealed.invalid',
        password: PASSWORD,
      });
      const answer = await rotatedHttp.call('staffAuth.mfaVerify', {
        mutation: true,
        session,
        input: { code: await device.next() },
      });
      expect(answer.status).toBe(200);
    } finally {
      await rotated.server.close();
    }
    expect((await storedSecrets(userId))?.secret).toMatch(new RegExp(`^v1\\.${newKey.split(':')[0]}\\.`));
  });

  it('I31-MFA development makes its key file in the data directory and says so; production without one refuses TOTP', async () => {
    const dataDir = join(keyDir, 'data');
    const start = async (settings: Record<string, string>) => {
      const lines: string[] = [];
      const { server: started, base: startedBase } = await startSilentServer(database, settings, {
        announce: (line) => lines.push(line),
      });
      return { started, base: startedBase, lines };
    };
    const first = await start({ NODE_ENV: 'development', IDEM_DATA_DIR: dataDir });
    await first.started.close();
    const keyPath = join(dataDir, 'mfa-kek.key');
    expect(first.lines).toContain(
      `Idem: made a TOTP key file for development at ${keyPath} (it seals staff TOTP secrets; set IDEM_MFA_KEY_FILE to your own in production and keep it out of database backups)`,
    );
    expect(statSync(keyPath).mode & 0o777).toBe(0o600);
    expect(readMfaKeyFile(keyPath).keys.size).toBe(1);
    // The next start reuses it, silently.
    const again = await start({ NODE_ENV: 'development', IDEM_DATA_DIR: dataDir });
    await again.started.close();
    expect(again.lines.filter((line) => line.includes('TOTP key file'))).toEqual([]);

    await member('no-key@sealed.invalid');
    const production = await start({
      NODE_ENV: 'production',
      IDEM_DATA_DIR: join(keyDir, 'prod'),
      // This test speaks plain http to 127.0.0.1.
      IDEM_COOKIE_SECURE: 'false',
    });
    try {
      const prodHttp = staffHttp(() => production.base);
      const session = await prodHttp.signIn({ tenantId, email: 'no-key@sealed.invalid', password: PASSWORD });
      const refused = await prodHttp.call('staffAuth.mfaEnrolStart', { mutation: true, session });
      expect([refused.status, errorCode(refused)]).toEqual([503, 'MFA_KEY_UNAVAILABLE']);
    } finally {
      await production.started.close();
    }
  });
});
