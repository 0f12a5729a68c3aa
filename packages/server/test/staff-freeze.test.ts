import { createStaffUser, setTenantGovernance, withTenant } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { approveAndApply } from './support/control-changes.ts';
import { createStaffOfRoles, startSilentServer } from './support/in-process.ts';
import { provisionTenant, type TenantFixture } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * The freeze switch over real HTTP (docs/GOVERNANCE.md "Freeze"): an operator freezes at once and
 * the audit log names them; support reads the freezes but cannot freeze; lifting is proposed by an
 * admin and applies only once another admin has approved it.
 */
let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;
const { call, signIn } = staffHttp(() => base);

const session = (role: 'support' | 'operator' | 'admin' | 'admin2'): Promise<StaffSession> =>
  signIn({ tenantId: tenant.tenantId, email: `${role}@freeze.invalid`, password: PASSWORD });

interface FreezeView {
  freezeId: string;
  scope: string;
  assetCode: string | null;
  frozenBy: string;
  liftedAt: string | null;
  pendingLiftProposalId: string | null;
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  tenant = await provisionTenant(database.db, { name: 'Frozen' });
  const passwordHash = await hashPassword(PASSWORD);
  await createStaffOfRoles(
    database.db,
    tenant.tenantId,
    ['support', 'operator', 'admin'],
    'freeze.invalid',
    passwordHash,
  );
  // A second admin, to approve a lift the first proposes.
  await withTenant(database.db, tenant.tenantId, (tx) =>
    createStaffUser(tx, {
      tenantId: tenant.tenantId,
      email: 'admin2@freeze.invalid',
      passwordHash,
      role: 'admin',
    }),
  );
  await setTenantGovernance(database.db, { tenantId: tenant.tenantId, looseningDelaySeconds: 0 });
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('I33-FREEZE the freeze switch over HTTP', () => {
  it('I33-FREEZE an operator freezes at once and is audited; support reads but cannot freeze', async () => {
    const support = await session('support');
    const refused = await call('staffFreeze.freeze', {
      mutation: true,
      session: support,
      input: { scope: 'tenant', reason: 'support tries' },
    });
    expect(refused.body.error?.data.code).toBe('FORBIDDEN');
    expect(
      dataOf<{ freezes: FreezeView[] }>(await call('staffFreeze.list', { session: support })).freezes,
    ).toEqual([]);

    const operator = await session('operator');
    const frozen = dataOf<FreezeView>(
      await call('staffFreeze.freeze', {
        mutation: true,
        session: operator,
        input: { scope: 'asset', assetCode: 'ETH', reason: 'node suspect' },
      }),
    );
    expect(frozen).toMatchObject({ scope: 'asset', assetCode: 'ETH', liftedAt: null });
    expect(frozen.frozenBy).toMatch(/^staff:/);
    const seen = dataOf<{ freezes: FreezeView[] }>(await call('staffFreeze.list', { session: support }));
    expect(seen.freezes.map((f) => f.freezeId)).toEqual([frozen.freezeId]);

    const admin = await session('admin');
    const audit = dataOf<{ items: { action: string; actor: string; outcome: string }[] }>(
      await call('staffAudit.list', { session: admin, input: {} }),
    ).items.filter((entry) => entry.action === 'staffFreeze.freeze');
    expect(audit.map((entry) => [entry.actor, entry.outcome])).toEqual(
      expect.arrayContaining([
        [frozen.frozenBy, 'ok'],
        [expect.stringMatching(/^staff:/), 'FORBIDDEN'],
      ]),
    );
  });

  it('I33-FREEZE an operator cannot propose the lift; an admin proposes, another admin approves, then it is lifted', async () => {
    const operator = await session('operator');
    const admin = await session('admin');
    const admin2 = await session('admin2');
    const [frozen] = dataOf<{ freezes: FreezeView[] }>(await call('staffFreeze.list', { session: operator }))
      .freezes as [FreezeView];
    const byOperator = await call('staffFreeze.proposeUnfreeze', {
      mutation: true,
      session: operator,
      input: { freezeId: frozen.freezeId },
    });
    expect(byOperator.body.error?.data.code).toBe('FORBIDDEN');
    const proposed = dataOf<{ outcome: string; proposalId: string }>(
      await call('staffFreeze.proposeUnfreeze', {
        mutation: true,
        session: admin,
        input: { freezeId: frozen.freezeId },
      }),
    );
    expect(proposed.outcome).toBe('PROPOSED');
    // Proposed is not lifted: still in force, the lift shown as waiting.
    const waiting = dataOf<{ freezes: FreezeView[] }>(await call('staffFreeze.list', { session: admin }));
    expect(waiting.freezes[0]).toMatchObject({ liftedAt: null, pendingLiftProposalId: proposed.proposalId });

    await approveAndApply(database.db, tenant.tenantId, call, admin2, proposed.proposalId);
    const lifted = dataOf<{ freezes: FreezeView[] }>(await call('staffFreeze.list', { session: admin }));
    expect(lifted.freezes[0]?.liftedAt).not.toBeNull();
  });

  it('I33-TRIP support reads the trips but cannot set them; an admin tightens at once; turning one off is proposed and applies after another admin approves', async () => {
    const support = await session('support');
    const operator = await session('operator');
    const admin = await session('admin');
    const admin2 = await session('admin2');
    const trip = { assetCode: null, failuresMax: 3, failuresWindowSeconds: 600, outflowShareMaxPercent: 50 };
    for (const member of [support, operator]) {
      const refused = await call('staffFreeze.setTrip', { mutation: true, session: member, input: trip });
      expect(refused.body.error?.data.code).toBe('FORBIDDEN');
    }
    expect(dataOf<{ trips: unknown[] }>(await call('staffFreeze.trips', { session: support })).trips).toEqual(
      [],
    );
    const set = dataOf<{ outcome: string; trip: { failuresMax: number } }>(
      await call('staffFreeze.setTrip', { mutation: true, session: admin, input: trip }),
    );
    expect(set).toMatchObject({ outcome: 'APPLIED', trip: { failuresMax: 3 } });
    const off = dataOf<{ outcome: string; proposalId: string }>(
      await call('staffFreeze.setTrip', {
        mutation: true,
        session: admin,
        input: { ...trip, outflowShareMaxPercent: null },
      }),
    );
    expect(off.outcome).toBe('PROPOSED');
    const waiting = dataOf<{
      trips: { outflowShareMaxPercent: number | null; pendingLoosenProposalId: string | null }[];
    }>(await call('staffFreeze.trips', { session: support }));
    expect(waiting.trips).toMatchObject([
      { outflowShareMaxPercent: 50, pendingLoosenProposalId: off.proposalId },
    ]);
    await approveAndApply(database.db, tenant.tenantId, call, admin2, off.proposalId);
    const applied = dataOf<{ trips: { outflowShareMaxPercent: number | null }[] }>(
      await call('staffFreeze.trips', { session: support }),
    );
    expect(applied.trips).toMatchObject([{ outflowShareMaxPercent: null }]);
  });
});
