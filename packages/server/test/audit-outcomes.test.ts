import { listAudit, rowsOf, setTenantGovernance, withTenant } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { createStaffOfRoles, startSilentServer } from './support/in-process.ts';
import { provisionTenant, type TenantFixture, uniqueId } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * The audit log tells the truth about outcomes: a staff action refused where it is decided (an
 * admin approving their own proposal, a decision on a proposal no longer pending) is recorded
 * once, with the refusal's code, and never as `ok`; an accepted one is recorded once as `ok`.
 * Driven over real HTTP; the log is read straight from the database.
 */
let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;
const { call, signIn } = staffHttp(() => base);

const session = (role: 'approver' | 'admin'): Promise<StaffSession> =>
  signIn({ tenantId: tenant.tenantId, email: `${role}@outcomes.invalid`, password: PASSWORD });

async function outcomesOf(action: string, proposalId: string): Promise<string[]> {
  const { items } = await withTenant(database.db, tenant.tenantId, (tx) =>
    listAudit(tx, tenant.tenantId, { action, limit: 100 }),
  );
  return items
    .filter((entry) => (entry.details as { proposalId?: string }).proposalId === proposalId)
    .map((entry) => entry.outcome)
    .reverse();
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  tenant = await provisionTenant(database.db, { name: 'Audited outcomes', fund: [] });
  const passwordHash = await hashPassword(PASSWORD);
  await createStaffOfRoles(
    database.db,
    tenant.tenantId,
    ['approver', 'admin'],
    'outcomes.invalid',
    passwordHash,
  );
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('I31-AUDIT refused actions are recorded as refused', () => {
  it('I31-AUDIT deciding your own proposal is recorded FORBIDDEN, once, never ok; the accepted decision ok; a late one INVALID_TRANSITION', async () => {
    const admin = await session('admin');
    const approver = await session('approver');
    const proposal = dataOf<{ proposal: { proposalId: string; payloadHash: string } }>(
      await call('staffProposals.propose', {
        mutation: true,
        session: admin,
        input: {
          kind: 'adjustment',
          idempotencyKey: uniqueId('adj'),
          payload: {
            accountId: uniqueId('cust'),
            asset: 'ETH',
            amountMinor: '900',
            reason: 'goodwill credit, ticket 1',
          },
        },
      }),
    ).proposal;
    const decide = (who: StaffSession) =>
      call('staffProposals.decide', {
        mutation: true,
        session: who,
        input: { proposalId: proposal.proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
      });

    expect((await decide(admin)).body.error?.data.code).toBe('FORBIDDEN');
    expect(await outcomesOf('staffProposals.decide', proposal.proposalId)).toEqual(['FORBIDDEN']);

    dataOf(await decide(approver));
    expect(await outcomesOf('staffProposals.decide', proposal.proposalId)).toEqual(['FORBIDDEN', 'ok']);

    expect((await decide(admin)).body.error?.data.code).toBe('INVALID_TRANSITION');
    expect(await outcomesOf('staffProposals.decide', proposal.proposalId)).toEqual([
      'FORBIDDEN',
      'ok',
      'INVALID_TRANSITION',
    ]);
  });

  it('I31-AUDIT a decision that finds its proposal expired is recorded EXPIRED, never ok; the proposal stays marked', async () => {
    const other = await provisionTenant(database.db, { name: 'Audited expiry', fund: [] });
    await createStaffOfRoles(
      database.db,
      other.tenantId,
      ['approver', 'admin'],
      'expiry.invalid',
      await hashPassword(PASSWORD),
    );
    await setTenantGovernance(database.db, { tenantId: other.tenantId, proposalTtlSeconds: 1 });
    const as = (role: 'approver' | 'admin') =>
      signIn({ tenantId: other.tenantId, email: `${role}@expiry.invalid`, password: PASSWORD });
    const admin = await as('admin');
    const approver = await as('approver');
    const proposal = dataOf<{ proposal: { proposalId: string; payloadHash: string; expiresAt: string } }>(
      await call('staffProposals.propose', {
        mutation: true,
        session: admin,
        input: {
          kind: 'adjustment',
          idempotencyKey: uniqueId('adj'),
          payload: {
            accountId: uniqueId('cust'),
            asset: 'ETH',
            amountMinor: '900',
            reason: 'goodwill, ticket 2',
          },
        },
      }),
    ).proposal;
    // The database's clock decides expiry: wait until it has passed.
    await vi.waitFor(
      async () => {
        const [row] = rowsOf<{ passed: boolean }>(
          await database.db.execute(sql`
            select now() > expires_at as passed from proposals where proposal_id = ${proposal.proposalId}::uuid`),
        );
        expect(row?.passed).toBe(true);
      },
      { timeout: 10_000, interval: 100 },
    );
    const decide = () =>
      call('staffProposals.decide', {
        mutation: true,
        session: approver,
        input: { proposalId: proposal.proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
      });
    const outcomes = async () => {
      const { items } = await withTenant(database.db, other.tenantId, (tx) =>
        listAudit(tx, other.tenantId, { action: 'staffProposals.decide', limit: 100 }),
      );
      return items.map((entry) => entry.outcome).reverse();
    };

    expect((await decide()).body.error?.data.code).toBe('EXPIRED');
    expect(await outcomes()).toEqual(['EXPIRED']);
    const [stored] = rowsOf<{ state: string }>(
      await database.db.execute(
        sql`select state from proposals where proposal_id = ${proposal.proposalId}::uuid`,
      ),
    );
    expect(stored?.state).toBe('EXPIRED');
    // Deciding the marked proposal again is refused the same way.
    expect((await decide()).body.error?.data.code).toBe('EXPIRED');
    expect(await outcomes()).toEqual(['EXPIRED', 'EXPIRED']);
  });
});
