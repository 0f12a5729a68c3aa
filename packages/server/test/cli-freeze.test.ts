import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  type Database,
  rowsOf,
  withTenant,
} from '@idem/core';
import { ETH } from '@idem/testing/chain';
import { onPostgres } from '@idem/testing/database';
import { evmAddress, provisionRiskPolicy } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idem } from './support/cli-process.ts';
import { printed } from './support/cli-results.ts';
import { type Backend, createBackend, disposeBackend } from './support/provision.ts';

interface PrintedFreeze {
  freezeId: string;
  scope: string;
  assetCode: string | null;
  accountRef: string | null;
  reason: string;
  frozenBy: string;
  liftedAt: string | null;
}

/**
 * I33-FREEZE from the deployment's side: `idem freeze` freezes a tenant, an asset or an account at
 * once, as the operator running the CLI (recorded as `cli:<who>`), and `idem freeze list` shows the
 * freezes in force and the withdrawals they hold. Lifting stays a staff control change: the CLI
 * has none. A refused request is typed and writes nothing. Through the real CLI process, on
 * PostgreSQL only (the PGlite half would add a minute and prove nothing more about the freeze).
 * Seen failing first: `idem freeze` was an unknown command; later, its freezes were missing from
 * the audit log.
 */
describe.skipIf(!onPostgres)('I33-FREEZE idem freeze (PostgreSQL)', () => {
  let backend: Backend;
  let tenantId: string;
  let slug: string;
  let heldId: string;

  let db: Database;

  const freezesOf = async () =>
    rowsOf<{ scope: string; frozen_by: string }>(
      await db.execute(
        sql`select scope, frozen_by from freezes where tenant_id = ${tenantId}::uuid order by frozen_at`,
      ),
    );

  beforeAll(async () => {
    backend = await createBackend('postgres');
    if (backend.kind !== 'postgres') throw new Error('PostgreSQL only');
    db = backend.database.db;
    ({ tenantId, slug } = await createTenant(db, { name: 'Frost Exchange', slug: `frost-${Date.now()}` }));
    await creditAsOperator(db, {
      tenantId,
      deposit: { reference: 'seed', accountId: 'cust-9', asset: 'ETH', amountMinor: (10n * ETH).toString() },
      idempotencyKey: 'seed',
      actor: 'test',
    });
    await provisionRiskPolicy(db, {
      tenantId,
      assetCode: 'ETH',
      autoApproveMaxMinor: ETH.toString(),
      fourEyesMinMinor: (100n * ETH).toString(),
    });
    heldId = await withTenant(db, tenantId, async (tx) => {
      const created = await createWithdrawal(tx, {
        tenantId,
        request: {
          withdrawalId: 'wd-held',
          accountId: 'cust-9',
          asset: 'ETH',
          destination: evmAddress(),
          amountMinor: (ETH / 10n).toString(),
        },
        idempotencyKey: 'withdrawal-wd-held',
      });
      return created.operation.operationId;
    });
  });
  afterAll(async () => {
    if (backend) await disposeBackend(backend);
  });

  it('I33-FREEZE refuses a malformed freeze, typed, and writes nothing', async () => {
    const cases: [string[], RegExp][] = [
      [['--scope', 'asset', '--reason', 'no asset named'], /^idem: VALIDATION: /],
      [
        ['--scope', 'account', '--asset', 'ETH', '--reason', 'asset on an account freeze'],
        /^idem: VALIDATION: /,
      ],
      [['--scope', 'asset', '--asset', 'DOGE', '--reason', 'unknown asset'], /^idem: VALIDATION: .*DOGE/],
      [['--scope', 'account', '--account', 'cust-9'], /^idem: VALIDATION: /],
      [['--scope', 'region', '--reason', 'no such scope'], /^idem: VALIDATION: /],
    ];
    for (const [args, message] of cases) {
      const run = await idem(backend.env, 'freeze', '--tenant', tenantId, ...args);
      expect(run.code, run.stdout).toBe(1);
      expect(run.stderr).toMatch(message);
    }
    const unknown = await idem(
      backend.env,
      'freeze',
      '--tenant',
      'no-such-org',
      '--scope',
      'tenant',
      '--reason',
      'x',
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^idem: NOT_FOUND: /);
    const usage = await idem(backend.env, 'freeze', '--scope', 'tenant', '--reason', 'no tenant');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--tenant is required');
    expect(await freezesOf()).toEqual([]);
  });

  it('I33-FREEZE freezes an account at once as the CLI operator; freeze list shows it and the withdrawal it holds', async () => {
    const frozen = printed<PrintedFreeze>(
      await idem(
        backend.env,
        ...['freeze', '--tenant', slug, '--scope', 'account', '--account', 'cust-9'],
        ...['--reason', 'incident 7: account taken over', '--by', 'oncall-ana', '--json'],
      ),
    );
    expect(frozen).toMatchObject({
      scope: 'account',
      accountRef: 'cust-9',
      assetCode: null,
      reason: 'incident 7: account taken over',
      frozenBy: 'cli:oncall-ana',
      liftedAt: null,
    });
    // Asked again, the freeze in force is answered: nothing is frozen twice.
    const again = printed<PrintedFreeze>(
      await idem(
        backend.env,
        ...['freeze', '--tenant', tenantId, '--scope', 'account', '--account', 'cust-9'],
        ...['--reason', 'again', '--json'],
      ),
    );
    expect(again.freezeId).toBe(frozen.freezeId);
    const asset = printed<PrintedFreeze>(
      await idem(
        backend.env,
        'freeze',
        '--tenant',
        tenantId,
        '--scope',
        'asset',
        '--asset',
        'ETH',
        '--reason',
        'ETH node incident',
        '--json',
      ),
    );
    expect(asset).toMatchObject({ scope: 'asset', assetCode: 'ETH' });
    expect(asset.frozenBy).toMatch(/^cli:/);

    const list = printed<{
      tenantId: string;
      freezes: PrintedFreeze[];
      held: { operationId: string; heldBy: string[] }[];
    }>(await idem(backend.env, 'freeze', 'list', '--tenant', slug, '--json'));
    expect(list.tenantId).toBe(tenantId);
    expect(list.freezes.map((f) => f.freezeId).sort()).toEqual([frozen.freezeId, asset.freezeId].sort());
    expect(list.held).toEqual([
      expect.objectContaining({ operationId: heldId, heldBy: [frozen.freezeId, asset.freezeId] }),
    ]);
    // Without --json: one line per freeze and per held withdrawal, readable in an incident.
    const text = await idem(backend.env, 'freeze', 'list', '--tenant', tenantId);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(frozen.freezeId);
    expect(text.stdout).toContain(heldId);
  });

  it("I33-FREEZE every idem freeze is in the tenant's audit log as the operator's action, a refused one with its code, and the chain holds", async () => {
    const entriesOf = async () =>
      rowsOf<{ actor: string; action: string; outcome: string; source_address: string; details: unknown }>(
        await db.execute(
          sql`select actor, action, outcome, source_address, details from audit_log
               where tenant_id = ${tenantId}::uuid and action = 'cli:freeze' order by sequence`,
        ),
      );
    const before = (await entriesOf()).length;
    const frozen = await idem(
      backend.env,
      ...['freeze', '--tenant', tenantId, '--scope', 'account', '--account', 'cust-audit'],
      ...['--reason', 'audited freeze', '--by', 'oncall-bo', '--json'],
    );
    expect(frozen.code, frozen.stderr).toBe(0);
    const refused = await idem(
      backend.env,
      ...['freeze', '--tenant', tenantId, '--scope', 'asset', '--asset', 'DOGE'],
      ...['--reason', 'audited refusal', '--by', 'oncall-bo'],
    );
    expect(refused.code).toBe(1);
    expect((await entriesOf()).slice(before)).toEqual([
      {
        actor: 'cli:oncall-bo',
        action: 'cli:freeze',
        outcome: 'ok',
        source_address: 'cli',
        details: { scope: 'account', accountRef: 'cust-audit', reason: 'audited freeze' },
      },
      {
        actor: 'cli:oncall-bo',
        action: 'cli:freeze',
        outcome: 'VALIDATION',
        source_address: 'cli',
        details: { scope: 'asset', assetCode: 'DOGE', reason: 'audited refusal' },
      },
    ]);
    const verify = await idem(backend.env, 'audit', 'verify', '--tenant', tenantId, '--json');
    expect(verify.code, verify.stderr).toBe(0);
  });

  it('I33-FREEZE the CLI lifts nothing: lifting is a staff control change, and the help says so', async () => {
    const lift = await idem(backend.env, 'freeze', 'lift', '--tenant', tenantId);
    expect(lift.code).toBe(2);
    const help = await idem(backend.env, '--help');
    expect(help.stdout).toMatch(/freeze --tenant/);
    expect(help.stdout).toMatch(/no CLI lift/i);
    expect((await freezesOf()).every((row) => row.frozen_by.startsWith('cli:'))).toBe(true);
  });
});
