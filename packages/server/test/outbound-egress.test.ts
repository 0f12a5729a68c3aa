import { rmSync } from 'node:fs';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { egressPolicyFrom, readEnv } from '../src/env.ts';
import { idem } from './support/cli-process.ts';
import { printed } from './support/cli-results.ts';
import { createStaffOfRoles, startSilentServer } from './support/in-process.ts';
import {
  backendKinds,
  createBackend,
  disposeBackend,
  provisionTenant,
  type TenantFixture,
  withDirectDatabase,
} from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * An administrator cannot aim an outbound webhook inside the deployment's network through the
 * staff API: each internal target is refused when saved, with a VALIDATION error that writes
 * nothing (the endpoint list is unchanged, the audit log records the refusal). The server runs
 * without an allowlist. The deployment's settings (https outside development, the allowlist) are
 * read from the environment in one place, env.ts.
 */
let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;
const { call, signIn } = staffHttp(() => base);

const admin = (): Promise<StaffSession> =>
  signIn({ tenantId: tenant.tenantId, email: 'admin@egress.invalid', password: PASSWORD });

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  tenant = await provisionTenant(database.db, { name: 'Egress' });
  await createStaffOfRoles(
    database.db,
    tenant.tenantId,
    ['admin'],
    'egress.invalid',
    await hashPassword(PASSWORD),
  );
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('I31-EGRESS outbound endpoints cannot reach inside through the staff API', () => {
  it('I31-EGRESS the database, the metadata service, an internal admin page and this server itself are refused; nothing is written', async () => {
    const session = await admin();
    const listed = async () =>
      dataOf<{ outbound: unknown[] }>(await call('staffConfig.endpoints', { session })).outbound.length;
    const before = await listed();
    for (const url of [
      'http://127.0.0.1:5432/',
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.5:8080/admin',
      `http://localhost:${server.port}/healthz`,
      'https://[::ffff:169.254.169.254]/latest/meta-data/',
    ]) {
      const refused = await call('staffConfig.createOutboundEndpoint', {
        mutation: true,
        session,
        input: { url },
      });
      expect(refused.body.error?.data.code, url).toBe('VALIDATION');
      expect(refused.body.error?.data.detail).toMatch(/public address/);
    }
    expect(await listed()).toBe(before);
    const entries = dataOf<{ items: { action: string; outcome: string }[] }>(
      await call('staffAudit.list', { session, input: {} }),
    ).items.filter((entry) => entry.action === 'staffConfig.createOutboundEndpoint');
    expect(entries.map((entry) => entry.outcome)).toEqual(Array(5).fill('VALIDATION'));
  });

  it('I31-EGRESS the deployment settings: https outside development, an allowlist of addresses, ranges and names; a bad entry stops the start', () => {
    const production = readEnv({ IDEM_WEBHOOK_ALLOW_INTERNAL: ' 10.20.0.0/16, hooks.corp.internal ,::1' });
    expect(egressPolicyFrom(production, { embedded: false })).toEqual({
      allowPlainHttp: false,
      allowInternal: ['10.20.0.0/16', 'hooks.corp.internal', '::1'],
    });
    expect(egressPolicyFrom(readEnv({}), { embedded: false })).toEqual({
      allowPlainHttp: false,
      allowInternal: [],
    });
    // Development: NODE_ENV development or test, or the embedded demo.
    expect(egressPolicyFrom(readEnv({ NODE_ENV: 'test' }), { embedded: false }).allowPlainHttp).toBe(true);
    expect(egressPolicyFrom(readEnv({}), { embedded: true }).allowPlainHttp).toBe(true);
    expect(() => readEnv({ IDEM_WEBHOOK_ALLOW_INTERNAL: '10.0.0.0/33' })).toThrow(
      /IDEM_WEBHOOK_ALLOW_INTERNAL/,
    );
    expect(() => readEnv({ IDEM_WEBHOOK_ALLOW_INTERNAL: 'http://10.0.0.5/' })).toThrow(
      /IDEM_WEBHOOK_ALLOW_INTERNAL/,
    );
  });
});

describe('I31-EGRESS idem outbound-endpoint create holds to the same policy', () => {
  it('I31-EGRESS the CLI refuses internal targets with VALIDATION and saves an allowlisted one', async () => {
    const kind = backendKinds[0] ?? 'pglite';
    const backend = await createBackend(kind);
    try {
      const tenantId = await withDirectDatabase(
        backend,
        async (db) => (await provisionTenant(db, { name: 'CLI egress' })).tenantId,
      );
      for (const url of ['http://169.254.169.254/latest/meta-data/', 'https://10.0.0.5:8080/admin']) {
        const run = await idem(
          backend.env,
          'outbound-endpoint',
          'create',
          '--tenant',
          tenantId,
          '--url',
          url,
        );
        expect(run.code, url).toBe(1);
        expect(run.stderr).toContain('VALIDATION: url must reach a public address');
      }
      const allowed = printed<{ url: string }>(
        await idem(
          { ...backend.env, IDEM_WEBHOOK_ALLOW_INTERNAL: '127.0.0.1' },
          'outbound-endpoint',
          'create',
          '--tenant',
          tenantId,
          '--url',
          'http://127.0.0.1:9/hook',
          '--json',
        ),
      );
      expect(allowed.url).toBe('http://127.0.0.1:9/hook');
      const badList = await idem(
        { ...backend.env, IDEM_WEBHOOK_ALLOW_INTERNAL: '10.0.0.0/33' },
        'outbound-endpoint',
        'create',
        '--tenant',
        tenantId,
        '--url',
        'https://10.0.0.5/',
      );
      expect(badList.code).not.toBe(0);
      expect(badList.stderr).toContain('IDEM_WEBHOOK_ALLOW_INTERNAL');
    } finally {
      await disposeBackend(backend);
      if (backend.kind === 'pglite') rmSync(backend.dataDir, { recursive: true, force: true });
    }
  });
});
