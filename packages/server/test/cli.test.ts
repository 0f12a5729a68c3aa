import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IdemError } from '@idem/contracts';
import {
  authenticateApiKey,
  createApiKey,
  createStaffUser,
  createTenant,
  type Database,
  type DatabaseHandle,
  findWebhookEndpoint,
  getBalances,
  getHotWallet,
  listAssets,
  listAudit,
  migrationsFolder,
  openDatabase,
  rowsOf,
  schema,
  tenantForSlug,
  withTenant,
} from '@idem/core';
import { openPkcs11Signer } from '@idem/rails';
import { createIdemClient, IdemApiError, type IdemClient, withdrawalKey } from '@idem/sdk';
import { onPostgres, scratchPostgresDatabase, serverUrl } from '@idem/testing/database';
import { type ServerProcess, startServerProcess } from '@idem/testing/server';
import { initSoftHsmToken, type SoftHsmToken, softHsmModulePath } from '@idem/testing/signer';
import { count, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../src/auth/password.ts';
import { type CliRun, idem } from './support/cli-process.ts';
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

/** The one JSON line a `--json` command prints, after checking it succeeded. */
function printed<T>(run: CliRun): T {
  expect(run, run.stderr).toMatchObject({ code: 0, stderr: '' });
  const lines = run.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0] ?? '') as T;
}

/** What refusing `promise` threw (fails the test if it resolved). */
async function refusal(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a refusal, but the call succeeded');
    },
    (error: unknown) => error,
  );
}

/**
 * A database nothing has touched yet, not even migrations: an empty data directory on PGlite, a
 * newly created, empty database on PostgreSQL. `open` opens it without migrating.
 */
async function blankDatabase(kind: 'pglite' | 'postgres'): Promise<{
  env: Record<string, string>;
  open(): Promise<DatabaseHandle>;
  dispose(): Promise<void>;
}> {
  if (kind === 'pglite') {
    const dataDir = mkdtempSync(join(tmpdir(), 'idem-cli-'));
    return {
      env: { IDEM_DATA_DIR: dataDir },
      open: () => openDatabase({ dataDir: join(dataDir, 'pgdata') }),
      dispose: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const base = serverUrl();
  if (!base) throw new Error('PostgreSQL backend without a server URL');
  const scratch = await scratchPostgresDatabase(base, 'idem_cli');
  return {
    env: { DATABASE_URL: scratch.url, IDEM_DB_POOL_MAX: '2' },
    open: () => openDatabase({ url: scratch.url, maxConnections: 1 }),
    dispose: () => scratch.drop(),
  };
}

/** One account's operations and balances, and how many postings its tenant's journal holds. */
async function ledgerOf(db: Database, tenantId: string, accountId: string) {
  return withTenant(db, tenantId, async (tx) => {
    const [operations] = await tx
      .select({ n: count() })
      .from(schema.operations)
      .where(eq(schema.operations.accountRef, accountId));
    const [postings] = await tx.select({ n: count() }).from(schema.postings);
    return {
      operations: Number(operations?.n),
      postings: Number(postings?.n),
      balances: await getBalances(tx, tenantId, accountId),
    };
  });
}

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
      firstKey = await createApiKey(db, tenantId, { label: 'first' });
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
    expect(Object.keys(created).sort()).toEqual(['apiKey', 'keyId', 'mfaRequired', 'slug', 'tenantId']);

    await withDirectDatabase(backend, async (db) => {
      const assets = await withTenant(db, created.tenantId, (tx) => listAssets(tx, created.tenantId));
      expect(assets.map(({ code, network, decimals }) => ({ code, network, decimals }))).toEqual([
        { code: 'BTC', network: 'bitcoin', decimals: 8 },
        { code: 'ETH', network: 'ethereum', decimals: 18 },
        { code: 'USDC', network: 'ethereum', decimals: 6 },
      ]);
      expect(await authenticateApiKey(db, created.apiKey)).toEqual({
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
    await withDirectDatabase(backend, async (db) => {
      expect(await authenticateApiKey(db, second.apiKey)).toEqual({ tenantId, keyId: second.keyId });
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
      expect(await authenticateApiKey(db, firstKey.apiKey)).toEqual({ tenantId, keyId: firstKey.keyId });
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
 * Issue 11, finding 6, end to end: an integrator's withdrawal, the operator changing the risk
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

interface PrintedProposal {
  outcome?: string;
  proposal: {
    proposalId: string;
    kind: string;
    state: string;
    payloadHash: string;
    proposedBy: string;
    approvalsGiven: number;
    approvalsRequired: number;
    result: { operationId?: string } | null;
  };
}

/**
 * Adjustments and manual credits from the CLI: proposed by one signed-in staff member, approved by
 * another, bound to the hash shown (I11-F5). The CLI checks the password as the server's sign-in
 * does and the role's permission; the actor recorded is the staff member.
 */
// Each CLI run opens (and on PGlite, starts) the database anew: the walkthroughs get 5 minutes.
describe.each(backendKinds)('idem proposal (%s)', (kind) => {
  let backend: Backend;
  let tenantId: string;
  const password = 'correct horse battery staple';
  const staff: Record<'operator' | 'approver' | 'support' | 'admin', string> = {
    operator: '',
    approver: '',
    support: '',
    admin: '',
  };

  beforeAll(async () => {
    backend = await createBackend(kind);
    const passwordHash = await hashPassword(password);
    await withDirectDatabase(backend, async (db) => {
      ({ tenantId } = await createTenant(db, { name: 'Proposal Exchange', mfaRequired: false }));
      for (const role of ['operator', 'approver', 'support', 'admin'] as const) {
        const user = await withTenant(db, tenantId, (tx) =>
          createStaffUser(tx, { tenantId, email: `${role}@example.com`, role, passwordHash }),
        );
        staff[role] = user.userId;
      }
    });
  });
  afterAll(async () => {
    if (!backend) return;
    await disposeBackend(backend);
    if (backend.kind === 'pglite') rmSync(backend.dataDir, { recursive: true, force: true });
  });

  /** `idem proposal ...` as the staff member with this role, the password in the environment. */
  const as = (role: keyof typeof staff, ...args: string[]) =>
    idem(
      { ...backend.env, IDEM_STAFF_PASSWORD: password },
      'proposal',
      ...args,
      '--tenant',
      tenantId,
      '--as',
      `${role}@example.com`,
    );

  it('I11-F5 an operator proposes a manual credit; nothing moves until another staff member approves; then once, with its entry', async () => {
    const credit = [
      ...['credit', '--account', 'cust-f5', '--asset', 'ETH', '--amount', '1000'],
      ...['--reference', 'chain-tx-f5-1', '--reason', 'custodian webhook lost, ticket 77', '--key', 'pc-1'],
    ];
    const proposed = printed<PrintedProposal>(await as('operator', ...credit, '--json'));
    expect(proposed).toMatchObject({
      outcome: 'CREATED',
      proposal: {
        kind: 'manual_credit',
        state: 'PENDING',
        proposedBy: `staff:${staff.operator}`,
        approvalsGiven: 0,
        approvalsRequired: 1,
      },
    });
    const { proposalId, payloadHash } = proposed.proposal;
    const before = await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-f5'));
    expect(before).toMatchObject({ operations: 0, balances: [] });

    // The same key and payload replays; nothing new.
    expect(printed<PrintedProposal>(await as('operator', ...credit, '--json'))).toMatchObject({
      outcome: 'REPLAYED',
      proposal: { proposalId },
    });

    // The proposer cannot approve their own proposal.
    const self = await as('operator', 'approve', '--id', proposalId, '--hash', payloadHash);
    expect(self.code).toBe(1);
    expect(self.stderr).toMatch(/^idem: FORBIDDEN: /);
    // An admin holds 'decide' but a wrong hash binds nothing.
    const wrongHash = await as('admin', 'approve', '--id', proposalId, '--hash', 'a'.repeat(64));
    expect(wrongHash.code).toBe(1);
    expect(wrongHash.stderr).toMatch(/^idem: PAYLOAD_MISMATCH: /);
    // Support may read but not decide.
    const support = await as('support', 'approve', '--id', proposalId, '--hash', payloadHash);
    expect(support.code).toBe(1);
    expect(support.stderr).toMatch(/^idem: FORBIDDEN: the support role may not/);
    expect(await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-f5'))).toEqual(before);

    const pending = printed<{ items: PrintedProposal['proposal'][] }>(
      await as('support', 'list', '--state', 'PENDING', '--json'),
    );
    expect(pending.items.map((p) => p.proposalId)).toContain(proposalId);

    const approved = printed<PrintedProposal>(
      await as('approver', 'approve', '--id', proposalId, '--hash', payloadHash, '--json'),
    );
    expect(approved.proposal).toMatchObject({ state: 'EXECUTED', approvalsGiven: 1 });
    const operationId = approved.proposal.result?.operationId;
    expect(operationId).toBeTruthy();

    const after = await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-f5'));
    expect(after).toMatchObject({
      operations: 1,
      balances: [{ asset: 'ETH', available: '1000', held: '0' }],
    });
    // One balanced entry: a debit of custody control and a credit of the account.
    expect(after.postings - before.postings).toBe(2);
    // I14-AUDIT every CLI staff action is in the audit log, refusals included, with its source.
    const audit = await withDirectDatabase(backend, (db) =>
      withTenant(db, tenantId, (tx) => listAudit(tx, tenantId, { limit: 100 })),
    );
    const seen = audit.items.map((e) => `${e.actor} ${e.action} ${e.outcome}`).reverse();
    expect(seen).toEqual([
      `staff:${staff.operator} cli:proposal manual_credit ok`,
      `staff:${staff.operator} cli:proposal manual_credit ok`,
      `staff:${staff.operator} cli:proposal approve FORBIDDEN`,
      `staff:${staff.admin} cli:proposal approve PAYLOAD_MISMATCH`,
      `staff:${staff.support} cli:proposal approve FORBIDDEN`,
      `staff:${staff.approver} cli:proposal approve ok`,
    ]);
    expect(audit.items.every((e) => e.sourceAddress === 'cli')).toBe(true);
    await withDirectDatabase(backend, async (db) => {
      const [operation] = await withTenant(db, tenantId, (tx) =>
        tx
          .select()
          .from(schema.operations)
          .where(eq(schema.operations.operationId, operationId ?? '')),
      );
      expect(operation).toMatchObject({ kind: 'deposit', state: 'CONFIRMED', reference: 'chain-tx-f5-1' });
    });

    // A second approval, or a repeat, changes nothing.
    const again = await as('admin', 'approve', '--id', proposalId, '--hash', payloadHash);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^idem: INVALID_TRANSITION: /);
    expect(await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-f5'))).toEqual(after);

    const shown = printed<PrintedProposal['proposal'] & { decisions: { approver: string }[] }>(
      await as('support', 'show', '--id', proposalId, '--json'),
    );
    expect(shown).toMatchObject({ state: 'EXECUTED', decisions: [{ approver: `staff:${staff.approver}` }] });
  }, 300_000);

  it('I11-F5 an adjustment debit is proposed and approved by two people; an overdrawing one is refused at approval with nothing written', async () => {
    const fundCredit = [
      ...['credit', '--account', 'cust-adj', '--asset', 'ETH', '--amount', '500'],
      ...[
        '--reference',
        'chain-tx-f5-2',
        '--reason',
        'opening balance from custody',
        '--key',
        'pc-2',
        '--json',
      ],
    ];
    const funded = printed<PrintedProposal>(await as('operator', ...fundCredit));
    printed(
      await as(
        'approver',
        'approve',
        '--id',
        funded.proposal.proposalId,
        '--hash',
        funded.proposal.payloadHash,
        '--json',
      ),
    );

    const adjust = (amount: string, key: string) =>
      as(
        'operator',
        ...['adjustment', '--account', 'cust-adj', '--asset', 'ETH', `--amount=${amount}`],
        ...['--reason', 'duplicate credit reversed, ticket 12', '--key', key, '--json'],
      );
    const debit = printed<PrintedProposal>(await adjust('-200', 'pa-1'));
    expect(debit.proposal).toMatchObject({ kind: 'adjustment', state: 'PENDING' });
    const tooMuch = printed<PrintedProposal>(await adjust('-400', 'pa-2'));

    printed(
      await as(
        'approver',
        'approve',
        '--id',
        debit.proposal.proposalId,
        '--hash',
        debit.proposal.payloadHash,
        '--json',
      ),
    );
    const afterDebit = await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-adj'));
    expect(afterDebit.balances).toEqual([{ asset: 'ETH', available: '300', held: '0' }]);

    // 400 of 300 would overdraw: refused at approval, the decision rolled back with it.
    const refused = await as(
      'approver',
      'approve',
      '--id',
      tooMuch.proposal.proposalId,
      '--hash',
      tooMuch.proposal.payloadHash,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^idem: INSUFFICIENT_FUNDS: /);
    expect(await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-adj'))).toEqual(afterDebit);
    const still = printed<PrintedProposal['proposal']>(
      await as('operator', 'show', '--id', tooMuch.proposal.proposalId, '--json'),
    );
    expect(still).toMatchObject({ state: 'PENDING', approvalsGiven: 0 });

    // The proposer withdraws it; the approver may not cancel someone else's.
    const notTheirs = await as('approver', 'cancel', '--id', tooMuch.proposal.proposalId);
    expect(notTheirs.code).toBe(1);
    const cancelled = printed<PrintedProposal>(
      await as('operator', 'cancel', '--id', tooMuch.proposal.proposalId, '--json'),
    );
    expect(cancelled.proposal.state).toBe('CANCELLED');
  }, 300_000);

  it('I11-F5 a wrong password, an unknown e-mail, or a role without the permission is refused before anything is written', async () => {
    const propose = [
      ...['adjustment', '--account', 'cust-x', '--asset', 'ETH', '--amount', '5'],
      ...['--reason', 'goodwill credit, ticket 99', '--key', 'px-1'],
    ];
    const wrong = await idem(
      { ...backend.env, IDEM_STAFF_PASSWORD: 'not the password at all' },
      'proposal',
      ...propose,
      '--tenant',
      tenantId,
      '--as',
      'operator@example.com',
    );
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^idem: UNAUTHORIZED: /);
    const unknown = await idem(
      { ...backend.env, IDEM_STAFF_PASSWORD: password },
      'proposal',
      ...propose,
      '--tenant',
      tenantId,
      '--as',
      'nobody@example.com',
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^idem: UNAUTHORIZED: /);
    const approver = await as('approver', ...propose);
    expect(approver.code).toBe(1);
    expect(approver.stderr).toMatch(/^idem: FORBIDDEN: the approver role may not/);
    const list = printed<{ items: unknown[] }>(await as('support', 'list', '--json'));
    expect(
      list.items.filter((p) => (p as { payload: { accountId: string } }).payload.accountId === 'cust-x'),
    ).toEqual([]);
  });

  it.skipIf(kind === 'pglite')(
    'I11-F5 deposit (a direct credit) is refused against PostgreSQL unless IDEM_ALLOW_DIRECT_CREDIT=1',
    async () => {
      const deposit = [
        ...['deposit', '--tenant', tenantId, '--account', 'cust-direct', '--asset', 'ETH'],
        ...['--amount', '1000', '--key', 'direct-1', '--json'],
      ];
      const refused = await idem(backend.env, ...deposit);
      expect(refused.code).toBe(1);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toMatch(/^idem: FORBIDDEN: .*IDEM_ALLOW_DIRECT_CREDIT=1/);
      expect(await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-direct'))).toMatchObject({
        operations: 0,
        balances: [],
      });

      const allowed = printed<{ outcome: string }>(
        await idem({ ...backend.env, IDEM_ALLOW_DIRECT_CREDIT: '1' }, ...deposit),
      );
      expect(allowed.outcome).toBe('CREATED');
      expect(await withDirectDatabase(backend, (db) => ledgerOf(db, tenantId, 'cust-direct'))).toMatchObject({
        operations: 1,
        balances: [{ asset: 'ETH', available: '1000', held: '0' }],
      });
    },
  );
});

/**
 * I18: `idem hot-wallet create` generates the hot wallet's key inside a PKCS#11 token (SoftHSM2,
 * initialised here) and registers the wallet; `hot-wallet list` shows where each key lives and
 * the next nonce, never key material or a PIN. The PIN is given as a reference only.
 */
describe.skipIf(!softHsmModulePath())('I18 idem hot-wallet create and list with a PKCS#11 token', () => {
  let backend: Backend;
  let token: SoftHsmToken;
  let tenantId: string;

  beforeAll(async () => {
    token = initSoftHsmToken('idem-cli');
    backend = await createBackend('pglite');
    await withDirectDatabase(backend, async (db) => {
      ({ tenantId } = await createTenant(db, { name: 'HSM Exchange' }));
    });
  });
  afterAll(async () => {
    if (backend) await disposeBackend(backend);
    if (backend?.kind === 'pglite') rmSync(backend.dataDir, { recursive: true, force: true });
    token?.dispose();
  });

  const create = (pinRef: string) =>
    idem(
      { ...backend.env, ...token.env },
      'hot-wallet',
      'create',
      '--tenant',
      tenantId,
      '--network',
      'ethereum',
      '--pkcs11-module',
      token.modulePath,
      '--pkcs11-token',
      token.tokenLabel,
      '--pkcs11-pin-ref',
      pinRef,
      '--json',
    );

  it('I18 a PIN given in plain on the command line is refused before the token is touched', async () => {
    const run = await create(token.pin);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^--pkcs11-pin-ref must be a secret reference \(env:NAME or file:\/path\)/);
    expect(run.stderr).not.toContain(token.pin);
  });

  it('I18 create generates the key in the token and registers its address; list shows the key location and next nonce', async () => {
    const created = printed<{ network: string; address: string; keyLocation: string; nextNonce: number }>(
      await create(`env:${token.pinVariable}`),
    );
    expect(created.network).toBe('ethereum');
    expect(created.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(created.nextNonce).toBe(0);
    expect(created.keyLocation).toBe(
      `PKCS#11 token ${token.tokenLabel}, key id ${created.keyLocation.match(/key id ([0-9a-f]+)/)?.[1]}, module ${token.modulePath}, PIN from env:${token.pinVariable}`,
    );

    // The registered key reference opens the token key, and its public key is the wallet's address.
    const stored = await withDirectDatabase(backend, (db) =>
      withTenant(db, tenantId, (tx) => getHotWallet(tx, tenantId, 'ethereum')),
    );
    expect(stored.address).toBe(created.address);
    expect(openPkcs11Signer(stored.keyRef).address).toBe(created.address);

    const listed = await idem(backend.env, 'hot-wallet', 'list', '--tenant', tenantId, '--json');
    expect(printed<{ wallets: unknown[] }>(listed)).toEqual({
      wallets: [
        { network: 'ethereum', address: created.address, keyLocation: created.keyLocation, nextNonce: 0 },
      ],
    });
    expect(listed.stdout).not.toContain(token.pin);

    // A second wallet for the same network is refused before a key is generated.
    const again = await create(`env:${token.pinVariable}`);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/already has a hot wallet for ethereum/);
  });
});
