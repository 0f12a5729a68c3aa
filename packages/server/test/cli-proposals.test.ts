import { rmSync } from 'node:fs';
import { createStaffUser, createTenant, getHotWallet, listAudit, schema, withTenant } from '@idem/core';
import { initSoftHsmToken, type SoftHsmToken, softHsmModulePath } from '@idem/testing/signer';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../src/auth/password.ts';
import { idem, pkcs11Address } from './support/cli-process.ts';
import { ledgerOf, printed } from './support/cli-results.ts';
import {
  type Backend,
  backendKinds,
  createBackend,
  disposeBackend,
  withDirectDatabase,
} from './support/provision.ts';

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
    expect(await pkcs11Address({ ...backend.env, ...token.env }, stored.keyRef)).toBe(created.address);

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
