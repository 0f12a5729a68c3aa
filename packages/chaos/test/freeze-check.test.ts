/**
 * I33-FREEZE in the chaos run: the freeze fault's own hand (freeze-fault.ts: an admin freezes
 * through core, two admins lift through the real proposal path) and the check that nothing under
 * the freeze was newly signed (freeze-check.ts), against a real ledger and the real worker. The
 * check must pass on what the worker did (it held the frozen account's withdrawal, then signed it
 * once lifted) and fail on a signature recorded inside the window. Seen failing first: neither the
 * fault nor the check existed.
 *
 * Needs a real PostgreSQL server (the check reads it with postgres.js as the chaos run does).
 */
import { setTenantGovernance } from '@idem/core';
import { serverUrl } from '@idem/testing/database';
import { staffMembers } from '@idem/testing/tenants';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nothingSignedWhileFrozen } from '../src/freeze-check.ts';
import { FreezeDrill } from '../src/freeze-fault.ts';
import { type InvariantFixture, startInvariantFixture } from './support/invariant-fixture.ts';

const databaseUrl = serverUrl();

describe.skipIf(!databaseUrl)('I33-FREEZE the chaos run’s freeze fault and its check', () => {
  let f: InvariantFixture;
  let drill: FreezeDrill;

  beforeAll(async () => {
    f = await startInvariantFixture({
      name: 'Freeze Check',
      confirmations: 1,
      workerId: 'w-freeze',
      throughProxy: false,
    });
    const admins = (await staffMembers(f.database.db, f.tenantId, 'admin', 2)) as [string, string];
    await setTenantGovernance(f.database.db, { tenantId: f.tenantId, looseningDelaySeconds: 0 });
    drill = new FreezeDrill(f.sql, f.database.url as string, {
      tenants: [{ tenantId: f.tenantId }],
      accounts: ['acct-1'],
      tenantAdmins: [admins],
    });
  });
  afterAll(async () => {
    await drill?.close();
    await f?.dispose();
  });

  it('I33-FREEZE the frozen account’s withdrawal waits, is signed once two admins lift the freeze, and the check passes; a signature inside the window fails it', async () => {
    const before = await f.newWithdrawal();
    await f.worker.runOnce();
    expect((await f.operation(before)).state).toMatch(/SIGNED|BROADCAST/);

    const window = await drill.freeze({
      atMs: 0,
      kind: 'freeze',
      tenant: 0,
      scope: 'account',
      account: 0,
      forMs: 600_000,
    });
    expect(window).toMatchObject({ scope: 'account', accountRef: 'acct-1', lifted: false });
    const held = await f.newWithdrawal();
    await f.worker.runOnce();
    expect((await f.operation(held)).state).toBe('APPROVED');

    await drill.lift(window);
    expect(window.lifted).toBe(true);
    const [row] = await f.sql<{ lifted_by: string; control: string }[]>`
      select f.lifted_by, p.payload -> 'change' ->> 'control' as control
        from freezes f join proposals p on p.proposal_id = f.lift_proposal_id
       where f.freeze_id = ${window.freezeId}::uuid`;
    expect(row?.control).toBe('freeze_lift');
    await f.worker.runOnce();
    expect((await f.operation(held)).state).toMatch(/SIGNED|BROADCAST/);

    const passed = await nothingSignedWhileFrozen(f.sql, drill.windows);
    expect(passed).toMatchObject({ id: 'nothing-signed-while-frozen', status: 'pass', violations: [] });
    expect(passed.detail).toContain('0 signed under it');
    expect(passed.detail).toContain('1 signed after its lift');

    // A signature recorded inside the window (what a claim that ignored the freeze would leave).
    await f.sql.begin(async (tx) => {
      await tx`set local session_replication_role = replica`;
      await tx`insert into operation_transitions (tenant_id, operation_id, seq, from_state, to_state, actor, reason, created_at)
        select o.tenant_id, o.operation_id, 1000, 'SIGNING', 'SIGNED', 'mallory', 'ignored the freeze',
               f.frozen_at + (f.lifted_at - f.frozen_at) / 2
          from operations o, freezes f
         where o.operation_id = ${held}::uuid and f.freeze_id = ${window.freezeId}::uuid`;
    });
    const failed = await nothingSignedWhileFrozen(f.sql, drill.windows);
    expect(failed.status).toBe('fail');
    expect(failed.violations).toEqual([expect.stringContaining(`withdrawal ${held}: SIGNED transition`)]);
  });

  it('I33-FREEZE a run without its freeze is not checkable, never a pass over nothing', async () => {
    expect(await nothingSignedWhileFrozen(f.sql, [])).toMatchObject({ status: 'not-checkable' });
  });
});
