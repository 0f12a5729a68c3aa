import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { IdemError } from '@idem/contracts';
import {
  ALL_API_KEY_SCOPES,
  authenticateApiKey,
  createApiKey,
  createTenant,
  findWebhookEndpoint,
  listAssets,
  migrationsFolder,
  rowsOf,
  tenantForSlug,
  withTenant,
} from '@idem/core';
import { createIdemClient, IdemApiError, type IdemClient, withdrawalKey } from '@idem/sdk';
import { onPostgres } from '@idem/testing/database';
import { type ServerProcess, startServerProcess } from '@idem/testing/server';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idem } from './support/cli-process.ts';
import { blankDatabase, ledgerOf, printed, refusal } from './support/cli-results.ts';
import {
  type Backend,
  backendKinds,
  createBackend,
  disposeBackend,
  ETH,
  evmAddress,
  provisionTenant,
  type TenantFixture,
  uniqueId,
  withDirectDatabase,
} from './support/provision.ts';

/**
 * The `idem` CLI as an operator runs it: the real process (the bundle `pnpm idem` runs), its output and
 * exit code, and what it left in the database, on the embedded database and on PostgreSQL.
 */
describe.each(backendKinds)('idem CLI (%s)', (kind) => {
  let backend: Backend;
  /** A tenant provisioned directly, for the commands that act on an existing tenant. */
  let tenantId: string;
  let firstKey: { apiKey: string; keyId: string };

  /** The development switch for a direct credit; needed against PostgreSQL only. */
  const directCredit: Record<string, string> = kind === 'postgres' ? { IDEM_ALLOW_DIRECT_CREDIT: '1' } : {};

  beforeAll(async () => {
    backend = await createBackend(kind);
    await withDirectDatabase(backend, async (db) => {
      ({ tenantId } = await createTenant(db, { name: 'CLI Exchange' }));
      firstKey = await createApiKey(db, tenantId, {
        label: 'first',
        scopes: ALL_API_KEY_SCOPES,
        createdBy: 'test',
      });
    });
  });
  afterAll(async () => {
    if (!backend) return;
    await disposeBackend(backend);
    if (backend.kind === 'pglite') rmSync(backend.dataDir, { recursive: true, force: true });
  });

  it('migrate --json applies every migration to a fresh database and prints {"migrated":true}', async () => {
    const blank = await blankDatabase(kind);
    try {
      const output = printed<{ migrated: boolean; database: string }>(
        await idem(blank.env, 'migrate', '--json'),
      );
      expect(output).toEqual({ migrated: true, database: kind });

      const journal = JSON.parse(readFileSync(join(migrationsFolder, 'meta', '_journal.json'), 'utf8')) as {
        entries: unknown[];
      };
      const handle = await blank.open();
      try {
        const applied = rowsOf<{ n: number }>(
          await handle.db.execute(sql`select count(*)::int as n from drizzle.__drizzle_migrations`),
        );
        expect(applied).toEqual([{ n: journal.entries.length }]);
      } finally {
        await handle.close();
      }
    } finally {
      await blank.dispose();
    }
  });

  it('tenant create --json provisions BTC, ETH and USDC and prints an API key that authenticates', async () => {
    const created = printed<{ tenantId: string; apiKey: string; keyId: string }>(
      await idem(backend.env, 'tenant', 'create', '--name', 'Acme Exchange', '--json'),
    );
    expect(Object.keys(created).sort()).toEqual([
      'admins',
      'apiKey',
      'keyId',
      'mfaRequired',
      'mode',
      'slug',
      'tenantId',
    ]);
    // No admin named: setup mode, configured only through the deployment's CLI.
    expect(created).toMatchObject({ admins: [], mode: 'setup' });

    await withDirectDatabase(backend, async (db) => {
      const assets = await withTenant(db, created.tenantId, (tx) => listAssets(tx, created.tenantId));
      expect(assets.map(({ code, network, decimals }) => ({ code, network, decimals }))).toEqual([
        { code: 'BTC', network: 'bitcoin', decimals: 8 },
        { code: 'ETH', network: 'ethereum', decimals: 18 },
        { code: 'USDC', network: 'ethereum', decimals: 6 },
      ]);
      expect(await authenticateApiKey(db, created.apiKey)).toMatchObject({
        tenantId: created.tenantId,
        keyId: created.keyId,
      });
    });
  });

  it('I14-SIGNIN tenant create --slug sets the organisation slug staff sign in with; without it the slug comes from the name; MFA is on unless --mfa off', async () => {
    const given = printed<{ tenantId: string; slug: string; mfaRequired: boolean }>(
      await idem(backend.env, 'tenant', 'create', '--name', 'Given Exchange', '--slug', 'given-x', '--json'),
    );
    expect([given.slug, given.mfaRequired]).toEqual(['given-x', true]);
    const derived = printed<{ slug: string; mfaRequired: boolean }>(
      await idem(backend.env, 'tenant', 'create', '--name', 'Derived Exchange', '--mfa', 'off', '--json'),
    );
    expect([derived.slug, derived.mfaRequired]).toEqual(['derived-exchange', false]);
    const taken = await idem(
      backend.env,
      'tenant',
      'create',
      '--name',
      'Again',
      '--slug',
      'given-x',
      '--json',
    );
    expect(taken.code).not.toBe(0);
    await withDirectDatabase(backend, async (db) => {
      expect(await tenantForSlug(db, 'given-x')).toBe(given.tenantId);
    });
  });

  it('I14-MFA tenant mfa turns the TOTP requirement on or off and sets the step-up window', async () => {
    const created = printed<{ tenantId: string }>(
      await idem(backend.env, 'tenant', 'create', '--name', 'Setting Exchange', '--json'),
    );
    const changed = printed<{ tenantId: string; mfaRequired: boolean; mfaFreshSeconds: number }>(
      await idem(
        backend.env,
        'tenant',
        'mfa',
        '--tenant',
        created.tenantId,
        '--mfa',
        'off',
        '--fresh-seconds',
        '120',
        '--json',
      ),
    );
    expect(changed).toEqual({ tenantId: created.tenantId, mfaRequired: false, mfaFreshSeconds: 120 });
    const outOfRange = await idem(
      backend.env,
      'tenant',
      'mfa',
      '--tenant',
      created.tenantId,
      '--fresh-seconds',
      '5',
      '--json',
    );
    expect(outOfRange.code).not.toBe(0);
  });

  it('apikey create mints a key that authenticates; apikey revoke stops that key and no other', async () => {
    const second = printed<{ apiKey: string; keyId: string }>(
      await idem(backend.env, 'apikey', 'create', '--tenant', tenantId, '--json'),
    );
    expect(second.keyId).not.toBe(firstKey.keyId);
    // I31-KEYS: scopes and an expiry from the command line; every scope and none when omitted.
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const narrow = printed<{ apiKey: string; keyId: string; scopes: string[]; expiresAt: string }>(
      await idem(
        backend.env,
        ...['apikey', 'create', '--tenant', tenantId, '--scopes', 'read', '--expires', expiresAt, '--json'],
      ),
    );
    expect(narrow).toMatchObject({ scopes: ['read'], expiresAt });
    await withDirectDatabase(backend, async (db) => {
      expect(await authenticateApiKey(db, second.apiKey)).toEqual({
        tenantId,
        keyId: second.keyId,
        scopes: ['withdraw', 'customer-sessions', 'read', 'webhooks'],
        expiresAt: null,
      });
      expect(await authenticateApiKey(db, narrow.apiKey)).toMatchObject({ scopes: ['read'] });
    });

    const revoke = await idem(
      backend.env,
      'apikey',
      'revoke',
      '--tenant',
      tenantId,
      '--key-id',
      second.keyId,
    );
    expect(revoke).toEqual({ code: 0, stdout: `revoked: ${second.keyId}\n`, stderr: '' });

    await withDirectDatabase(backend, async (db) => {
      const error = await refusal(authenticateApiKey(db, second.apiKey));
      expect(error).toBeInstanceOf(IdemError);
      expect(error).toMatchObject({ code: 'UNAUTHORIZED' });
      expect(await authenticateApiKey(db, firstKey.apiKey)).toMatchObject({
        tenantId,
        keyId: firstKey.keyId,
      });
    });
  });

  it('deposit credits the account exactly once: CREATED, then REPLAYED with the balance unchanged (C24)', async () => {
    // Against PostgreSQL a direct credit needs the explicit development switch (I11-F5).
    const env = { ...backend.env, ...directCredit };
    const args = ['deposit', '--tenant', tenantId, '--account', 'cust-1', '--asset', 'ETH'];
    const deposit = [...args, '--amount', '1000', '--key', 'dep-1', '--json'];
    type Printed = { outcome: string; deposit: { operationId: string; amountMinor: string; state: string } };
    const first = printed<Printed>(await idem(env, ...deposit));
    expect(first).toMatchObject({
      outcome: 'CREATED',
      deposit: {
        kind: 'deposit',
        accountId: 'cust-1',
        asset: 'ETH',
        amountMinor: '1000',
        state: 'CONFIRMED',
      },
    });
    const credited = await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-1'));
    // cust-1 is this test's own account: the deposit is its only operation and its only credit.
    expect(credited).toMatchObject({
      operations: 1,
      balances: [{ asset: 'ETH', available: '1000', held: '0' }],
    });

    const again = printed<Printed>(await idem(env, ...deposit));
    expect(again).toEqual({ ...first, outcome: 'REPLAYED' });
    expect(await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-1'))).toEqual(credited);
  });

  it('deposit with an amount that is not whole minor units exits non-zero with VALIDATION and writes nothing', async () => {
    const before = await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-2'));
    const run = await idem(
      { ...backend.env, ...directCredit },
      ...['deposit', '--tenant', tenantId, '--account', 'cust-2', '--asset', 'ETH'],
      ...['--amount', '1.5', '--key', 'dep-bad', '--json'],
    );
    expect(run.code).not.toBe(0);
    expect(run.code).not.toBeNull();
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^idem: VALIDATION: .*amountMinor/);
    expect(await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-2'))).toEqual(before);
  });

  it('webhook-endpoint create --json prints the endpoint id and its secret, as stored', async () => {
    const endpoint = printed<{ endpointId: string; source: string; secret: string }>(
      await idem(
        backend.env,
        'webhook-endpoint',
        'create',
        '--tenant',
        tenantId,
        '--source',
        'custodian',
        '--json',
      ),
    );
    expect(endpoint.endpointId).toMatch(new RegExp(`^we_${tenantId.replaceAll('-', '')}_[0-9a-f]{16}$`));
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(endpoint.source).toBe('custodian');
    await withDirectDatabase(backend, async (db) => {
      const stored = await withTenant(db, tenantId, (tx) =>
        findWebhookEndpoint(tx, tenantId, endpoint.endpointId),
      );
      // Intake reads the secrets a signature may use: only this one, no rotation has happened.
      expect(stored).toEqual({
        endpointId: endpoint.endpointId,
        source: endpoint.source,
        secrets: [endpoint.secret],
      });
    });
  });

  it('I31-QUORUM tenant create --admin --admin2 names the first two admins with one-time passwords; one admin without --single-admin is a usage error', async () => {
    const created = printed<{
      tenantId: string;
      mode: string;
      admins: { email: string; userId: string; initialPassword: string }[];
    }>(
      await idem(
        backend.env,
        'tenant',
        'create',
        '--name',
        'Two Admins Exchange',
        '--admin',
        'first@two.invalid',
        '--admin2',
        'second@two.invalid',
        '--json',
      ),
    );
    expect(created.mode).toBe('quorum');
    expect(created.admins.map((admin) => admin.email)).toEqual(['first@two.invalid', 'second@two.invalid']);
    for (const admin of created.admins) expect(admin.initialPassword.length).toBeGreaterThanOrEqual(20);
    const lone = await idem(backend.env, 'tenant', 'create', '--name', 'Lone', '--admin', 'one@lone.invalid');
    expect(lone.code).toBe(2);
    expect(lone.stderr).toContain('--single-admin');
  });

  it('an unknown command exits 2 and prints the usage', async () => {
    const run = await idem(backend.env, 'tenant', 'delete', '--name', 'Acme');
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^unknown command: tenant delete\n\nUsage: pnpm idem <command>/);
    expect(run.stderr).toContain('tenant create --name NAME');
  });

  it('a missing required flag or a mistyped one exits 2, names the flag and prints the usage', async () => {
    const run = await idem(backend.env, 'tenant', 'create', '--json');
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^--name is required\n\nUsage: pnpm idem <command>/);
    const mistyped = await idem(backend.env, 'tenant', 'create', '--nmae', 'Typo');
    expect(mistyped.code).toBe(2);
    expect(mistyped.stderr).toMatch(/--nmae[\s\S]*\n\nUsage: pnpm idem <command>/);
  });

  it('I11-F6 risk-policy set bumps the policy version once per real change; risk-policy history shows who changed what', async () => {
    const { tenantId: fresh } = await withDirectDatabase(backend, (db) =>
      createTenant(db, { name: 'Policy Exchange' }),
    );
    const set = (autoApproveMax: string) =>
      idem(
        backend.env,
        ...['risk-policy', 'set', '--tenant', fresh, '--asset', 'ETH', '--auto-approve-max', autoApproveMax],
        ...['--four-eyes-min', '5000', '--by', 'ops:carol', '--json'],
      );
    type Set = { changed: boolean; policyVersion: number };
    expect(printed<Set>(await set('100'))).toMatchObject({ changed: true, policyVersion: 2 });
    expect(printed<Set>(await set('100'))).toMatchObject({ changed: false, policyVersion: 2 });
    expect(printed<Set>(await set('200'))).toMatchObject({ changed: true, policyVersion: 3 });

    const { changes } = printed<{ changes: Record<string, unknown>[] }>(
      await idem(backend.env, 'risk-policy', 'history', '--tenant', fresh, '--json'),
    );
    expect(changes).toHaveLength(2);
    expect(changes[0]).toMatchObject({ fromVersion: 1, toVersion: 2, actor: 'ops:carol', before: null });
    expect(changes[1]).toMatchObject({
      fromVersion: 2,
      toVersion: 3,
      assetCode: 'ETH',
      actor: 'ops:carol',
      before: { auto_approve_max_minor: '100', four_eyes_min_minor: '5000' },
      after: { auto_approve_max_minor: '200', four_eyes_min_minor: '5000' },
    });
    expect(Date.parse(String(changes[1]?.changedAt))).not.toBeNaN();
  });

  it('I14-LIVE explorer set stores an https template with {txHash} per network, refuses any other, and --none removes it', async () => {
    const template = 'https://etherscan.io/tx/{txHash}';
    const set = (...more: string[]) =>
      idem(backend.env, 'explorer', 'set', '--tenant', tenantId, '--network', 'ethereum', ...more, '--json');
    expect(printed(await set('--template', template))).toEqual({
      network: 'ethereum',
      txUrlTemplate: template,
    });
    const refused = await set('--template', 'http://etherscan.io/tx/{txHash}');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('VALIDATION');
    const listed = printed<{ explorers: unknown[] }>(
      await idem(backend.env, 'explorer', 'list', '--tenant', tenantId, '--json'),
    );
    expect(listed.explorers).toEqual([
      { network: 'bitcoin', txUrlTemplate: null },
      { network: 'ethereum', txUrlTemplate: template },
    ]);
    expect(printed(await set('--none'))).toEqual({ network: 'ethereum', txUrlTemplate: null });
  });
});

/**
 * Policy versions (I11-F6), end to end: an integrator's withdrawal, the operator changing the risk
 * rules with the CLI while the server runs (its cached policy version goes stale), and the
 * integrator's byte-identical retry through the SDK. PostgreSQL only: on PGlite the server holds
 * the data directory, so the CLI could not run beside it.
 */
describe.skipIf(!onPostgres)('I11-F6 a retry over HTTP after `idem risk-policy set` (PostgreSQL)', () => {
  let backend: Backend;
  let server: ServerProcess;
  let tenant: TenantFixture;
  let client: IdemClient;

  beforeAll(async () => {
    backend = await createBackend('postgres');
    tenant = await withDirectDatabase(backend, (db) => provisionTenant(db, { name: 'Retry Exchange' }));
    server = await startServerProcess(backend.env);
    client = createIdemClient({ baseUrl: server.baseUrl, apiKey: tenant.apiKey });
  });
  afterAll(async () => {
    await server?.stop();
    if (backend) await disposeBackend(backend);
  });

  it('I11-F6 an identical retry after a policy change replays; a changed amount still conflicts', async () => {
    const request = {
      withdrawalId: uniqueId('wd'),
      accountId: 'cust-7',
      asset: 'ETH',
      network: 'ethereum' as const,
      destination: evmAddress(),
      amountMinor: (ETH / 100n).toString(),
    };
    const key = withdrawalKey(request.withdrawalId);
    const created = await client.withdrawals.submit(request, key);
    expect(created.outcome).toBe('CREATED');

    const set = printed<{ changed: boolean; policyVersion: number }>(
      await idem(
        backend.env,
        ...['risk-policy', 'set', '--tenant', tenant.tenantId, '--asset', 'ETH'],
        ...['--auto-approve-max', '1', '--four-eyes-min', '2', '--by', 'ops:dave', '--json'],
      ),
    );
    expect(set).toMatchObject({ changed: true, policyVersion: 2 });

    const retry = await client.withdrawals.submit(request, key);
    expect(retry.outcome).toBe('REPLAYED');
    expect(retry.withdrawal.operationId).toBe(created.withdrawal.operationId);

    const changed = await client.withdrawals
      .submit({ ...request, amountMinor: (ETH / 50n).toString() }, key)
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(changed).toBeInstanceOf(IdemApiError);
    expect(changed).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT' });

    // A new withdrawal is hashed under the new rules' version.
    const next = { ...request, withdrawalId: uniqueId('wd') };
    const fresh = await client.withdrawals.submit(next, withdrawalKey(next.withdrawalId));
    expect(fresh.outcome).toBe('CREATED');
    const versions = await withDirectDatabase(backend, async (db) =>
      rowsOf<{ v: number }>(
        await db.execute(
          sql`select policy_version as v from operations where tenant_id = ${tenant.tenantId} and kind = 'withdrawal' order by created_at`,
        ),
      ),
    );
    expect(versions.map(({ v }) => v)).toEqual([1, 2]);
  });
});
