/**
 * Automatic trips of the freeze switch (docs/GOVERNANCE.md "Automatic trips"): thresholds a tenant
 * sets, measured by the workers' check (core checkFreezeTrips), which freezes by itself, once, when
 * one is crossed. Setting a trip stricter applies at once; looser is a control change, and the
 * application's database login cannot loosen one directly. Statements run as `idem_app` with the
 * tenant bound (`withTenant`), as the server and the workers run theirs. Time passes by moving rows
 * back (ageOperationHistory), never by sleeping.
 */
import type { FreezeTripSettings } from '@idem/contracts';
import { ageOperationHistory, createTestDatabase, type TestDatabase } from '@idem/testing/database';
import {
  ETH,
  fund,
  newTenant,
  staffMembers,
  strandWithdrawal,
  submit,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Tx } from '../src/db/connect.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import * as core from '../src/index.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.dispose());

const OFF: Omit<FreezeTripSettings, 'assetCode'> = {
  failuresMax: null,
  failuresWindowSeconds: null,
  outflowShareMaxPercent: null,
};

async function refusedWith(attempt: Promise<unknown>, reason: RegExp): Promise<void> {
  const error = await attempt.then(
    () => null,
    (caught: unknown) => caught as { message?: string; cause?: { message?: string } },
  );
  expect(error, 'refused').not.toBeNull();
  expect(`${error?.message ?? ''} ${error?.cause?.message ?? ''}`).toMatch(reason);
}

interface FreezeRow {
  freeze_id: string;
  scope: string;
  asset_code: string | null;
  frozen_by: string;
  reason: string;
}

async function freezesInForce(tenantId: string): Promise<FreezeRow[]> {
  return rowsOf<FreezeRow>(
    await withTenant(t.db, tenantId, (tx) =>
      tx.execute(sql`select freeze_id::text, scope, asset_code, frozen_by, reason from freezes
                      where lifted_at is null order by frozen_at, freeze_id`),
    ),
  );
}

/** A tenant with two admins (a loosening can be approved), no delay, funded in ETH. */
async function tenantWithTrips(name: string, fundEth = 100n) {
  const tenantId = await newTenant(t.db, name);
  const [alice, bob] = (await staffMembers(t.db, tenantId, 'admin', 2)) as [string, string];
  await core.setTenantGovernance(t.db, { tenantId, looseningDelaySeconds: 0 });
  await fund(t.db, tenantId, 'acct-1', 'ETH', fundEth * ETH);
  const asTenant = <T>(work: (tx: Tx) => Promise<T>) => withTenant(t.db, tenantId, work);
  const setTrip = (actor: string, settings: Partial<FreezeTripSettings>) =>
    asTenant((tx) =>
      core.setFreezeTrip(tx, { tenantId, actor, settings: { assetCode: null, ...OFF, ...settings } }),
    );
  let n = 0;
  const strand = async (to: 'UNKNOWN' | 'FAILED_TERMINAL' | 'BROADCAST', amountMinor?: bigint) => {
    n += 1;
    const reference = `${name.replace(/\W/g, '-')}-${n}`;
    const { operation } = await submit(
      t.db,
      tenantId,
      withdrawal({
        withdrawalId: reference,
        ...(amountMinor ? { amountMinor: amountMinor.toString() } : {}),
      }),
      reference,
    );
    return asTenant((tx) => strandWithdrawal(tx, operation, to, { txHash: `0x${reference}` }));
  };
  const check = () => asTenant((tx) => core.checkFreezeTrips(tx, tenantId));
  return { tenantId, alice, bob, asTenant, setTrip, strand, check };
}

describe('I33-TRIP the failures trip freezes the tenant', () => {
  it('I33-TRIP N withdrawals gone UNKNOWN or FAILED_TERMINAL in the window do not trip; N+1 freeze the tenant once, and admins are told', async () => {
    const { tenantId, alice, setTrip, strand, check, asTenant } = await tenantWithTrips('Trip Failures');
    expect(await setTrip(alice, { failuresMax: 2, failuresWindowSeconds: 600 })).toMatchObject({
      outcome: 'APPLIED',
    });
    await strand('UNKNOWN');
    await strand('FAILED_TERMINAL');
    // Sent and not mined is not a failure.
    await strand('BROADCAST');
    expect(await check()).toEqual([]);
    expect(await freezesInForce(tenantId)).toEqual([]);

    await strand('UNKNOWN');
    const fired = await check();
    expect(fired).toMatchObject([{ trip: 'failures', scope: 'tenant', assetCode: null }]);
    const [frozen] = await freezesInForce(tenantId);
    expect(frozen).toMatchObject({ scope: 'tenant', asset_code: null, frozen_by: 'system:trip:failures' });
    expect(frozen?.reason).toMatch(
      /3 withdrawals became UNKNOWN or FAILED_TERMINAL within 600 s, more than the 2/,
    );
    // Checked again: the freeze in force is the trip's one freeze. (Nothing new is signed under it
    // anyway: the claim for signing skips what it holds.)
    expect(await check()).toEqual([]);
    expect(await check()).toEqual([]);
    expect((await freezesInForce(tenantId)).map((f) => f.freeze_id)).toEqual([frozen?.freeze_id]);
    // Every admin is told.
    const notices = rowsOf<{ topic: string }>(
      await asTenant((tx) =>
        tx.execute(sql`select topic from staff_notifications where topic = 'freeze_tripped'`),
      ),
    );
    expect(notices).toHaveLength(2);
    // And it is in the tenant's audit log, once, like a freeze a person made.
    const audited = rowsOf<{
      actor: string;
      action: string;
      outcome: string;
      details: { freezeId?: string };
    }>(
      await asTenant((tx) =>
        tx.execute(sql`select actor, action, outcome, details from audit_log where action = 'freeze.trip'`),
      ),
    );
    expect(audited).toEqual([
      {
        actor: 'system:trip:failures',
        action: 'freeze.trip',
        outcome: 'ok',
        details: expect.objectContaining({ freezeId: frozen?.freeze_id, scope: 'tenant' }),
      },
    ]);
    // It behaves as a manual freeze: listed, and lifted only by a freeze_lift control change.
    const view = await asTenant((tx) => core.listFreezes(tx, tenantId));
    expect(view.freezes.map((f) => f.frozenBy)).toEqual(['system:trip:failures']);
  });

  it('I33-TRIP failures older than the window do not count', async () => {
    const { tenantId, alice, setTrip, strand, check } = await tenantWithTrips('Trip Window');
    await setTrip(alice, { failuresMax: 1, failuresWindowSeconds: 600 });
    const old = [await strand('UNKNOWN'), await strand('FAILED_TERMINAL')];
    await ageOperationHistory(
      t.db,
      sql`operations.operation_id in (${sql.join(
        old.map((op) => sql`${op.operationId}::uuid`),
        sql`, `,
      )})`,
      601,
    );
    await strand('UNKNOWN');
    expect(await check()).toEqual([]);
    expect(await freezesInForce(tenantId)).toEqual([]);
    // Inside the window, two are more than one.
    await strand('UNKNOWN');
    expect(await check()).toMatchObject([{ trip: 'failures' }]);
  });

  it('I33-TRIP two trip checks at once make one freeze', async () => {
    const { tenantId, alice, setTrip, strand, asTenant } = await tenantWithTrips('Trip Race');
    await setTrip(alice, { failuresMax: 0, failuresWindowSeconds: 600 });
    await strand('UNKNOWN');
    // Check A measures and inserts its freeze, and holds its transaction open; check B runs
    // meanwhile and sees no freeze committed. B must not make a second one: it waits for A at the
    // insert, then inserts nothing.
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let aInserted = () => {};
    const inserted = new Promise<void>((resolve) => {
      aInserted = resolve;
    });
    const a = asTenant(async (tx) => {
      const fired = await core.checkFreezeTrips(tx, tenantId);
      aInserted();
      await gate;
      return fired;
    });
    await inserted;
    let bSettled = false;
    const b = asTenant((tx) => core.checkFreezeTrips(tx, tenantId)).finally(() => {
      bSettled = true;
    });
    if (t.url) {
      // On PostgreSQL, until B finished on its own or waits on A's lock (PGlite has one connection:
      // B starts only after A).
      await vi.waitFor(
        async () => {
          const [row] = rowsOf<{ n: number }>(
            await t.db.execute(sql`select count(*)::int as n from pg_stat_activity
              where query like '%insert into freezes%' and wait_event_type = 'Lock' and pid <> pg_backend_pid()`),
          );
          if (!bSettled && (row?.n ?? 0) === 0) throw new Error('check B neither finished nor waits');
        },
        { timeout: 20_000, interval: 25 },
      );
    }
    release();
    const results = await Promise.all([a, b]);
    expect(results.map((fired) => fired.length)).toEqual([1, 0]);
    expect(await freezesInForce(tenantId)).toHaveLength(1);
  });

  it('I33-TRIP a lifted trip freeze does not trip again on what the admins already reviewed', async () => {
    const { tenantId, alice, bob, setTrip, strand, check, asTenant } = await tenantWithTrips('Trip Lifted');
    await setTrip(alice, { failuresMax: 0, failuresWindowSeconds: 600 });
    await strand('UNKNOWN');
    const [fired] = await check();
    const lift = await asTenant((tx) =>
      core.proposeUnfreeze(tx, { tenantId, actor: alice, freezeId: fired?.freezeId as string }),
    );
    const [hash] = rowsOf<{ payload_hash: string }>(
      await asTenant((tx) =>
        tx.execute(sql`select payload_hash from proposals where proposal_id = ${lift.proposalId}::uuid`),
      ),
    );
    await asTenant((tx) =>
      core.decideProposal(tx, {
        tenantId,
        proposalId: lift.proposalId as string,
        staffId: bob,
        payloadHash: hash?.payload_hash as string,
        decision: 'approve',
      }),
    );
    await asTenant((tx) => core.applyDueControlChanges(tx, tenantId));
    expect(await freezesInForce(tenantId)).toEqual([]);
    expect(await check()).toEqual([]);
    // A new failure after the lift trips it again.
    await strand('UNKNOWN');
    expect(await check()).toMatchObject([{ trip: 'failures' }]);
  });
});

describe('I33-TRIP the outflow trip freezes the asset', () => {
  it('I33-TRIP withdrawals sent within the hour above the share of the custody balance freeze the asset', async () => {
    // 100 ETH in custody; 20% allowed.
    const { tenantId, alice, setTrip, strand, check } = await tenantWithTrips('Trip Outflow');
    await setTrip(alice, { outflowShareMaxPercent: 20 });
    await strand('BROADCAST', 10n * ETH);
    await strand('UNKNOWN', 10n * ETH);
    // 20 ETH of 100: not above 20%.
    expect(await check()).toEqual([]);
    // Sent before the hour: not counted.
    const old = await strand('BROADCAST', 5n * ETH);
    await ageOperationHistory(t.db, sql`operations.operation_id = ${old.operationId}::uuid`, 3_601);
    expect(await check()).toEqual([]);
    await strand('BROADCAST', 1n * ETH);
    expect(await check()).toMatchObject([{ trip: 'outflow:ETH', scope: 'asset', assetCode: 'ETH' }]);
    const [frozen] = await freezesInForce(tenantId);
    expect(frozen).toMatchObject({ scope: 'asset', asset_code: 'ETH', frozen_by: 'system:trip:outflow:ETH' });
    expect(frozen?.reason).toMatch(
      /21000000000000000000 minor units of ETH sent within the hour, 21\.00% of/,
    );
    expect(await check()).toEqual([]);
  });
});

describe('I33-TRIP trip settings: stricter at once, looser only by a control change', () => {
  it('I33-TRIP an admin tightens at once; an operator cannot; a loosening is proposed and applies only after another admin approves', async () => {
    const { tenantId, alice, bob, setTrip, asTenant } = await tenantWithTrips('Trip Settings');
    const [operator] = (await staffMembers(t.db, tenantId, 'operator', 1)) as [string];
    await refusedWith(setTrip(operator, { outflowShareMaxPercent: 50 }), /only an active admin/);
    await setTrip(alice, { failuresMax: 5, failuresWindowSeconds: 600, outflowShareMaxPercent: 50 });
    // Stricter: applies.
    expect(
      await setTrip(alice, { failuresMax: 3, failuresWindowSeconds: 900, outflowShareMaxPercent: 40 }),
    ).toMatchObject({ outcome: 'APPLIED' });
    // Off: proposed, nothing changes yet.
    const loosen = await setTrip(alice, { failuresMax: 3, failuresWindowSeconds: 900 });
    expect(loosen).toMatchObject({ outcome: 'PROPOSED', approvalsRequired: 1 });
    const trips = () => asTenant((tx) => core.listFreezeTrips(tx, tenantId));
    expect((await trips()).trips).toMatchObject([
      { assetCode: null, outflowShareMaxPercent: 40, pendingLoosenProposalId: loosen.proposalId },
    ]);
    await asTenant((tx) => core.applyDueControlChanges(tx, tenantId));
    expect((await trips()).trips[0]?.outflowShareMaxPercent).toBe(40);
    const [hash] = rowsOf<{ payload_hash: string }>(
      await asTenant((tx) =>
        tx.execute(sql`select payload_hash from proposals where proposal_id = ${loosen.proposalId}::uuid`),
      ),
    );
    await asTenant((tx) =>
      core.decideProposal(tx, {
        tenantId,
        proposalId: loosen.proposalId as string,
        staffId: bob,
        payloadHash: hash?.payload_hash as string,
        decision: 'approve',
      }),
    );
    expect(await asTenant((tx) => core.applyDueControlChanges(tx, tenantId))).toMatchObject({ applied: 1 });
    expect((await trips()).trips).toMatchObject([
      { assetCode: null, failuresMax: 3, failuresWindowSeconds: 900, outflowShareMaxPercent: null },
    ]);
  });

  it('I33-TRIP the database refuses the application role loosening or deleting trips directly', async () => {
    const { tenantId, alice, setTrip, asTenant } = await tenantWithTrips('Trip Guard');
    await setTrip(alice, { failuresMax: 3, failuresWindowSeconds: 600, outflowShareMaxPercent: 40 });
    const statement = (query: ReturnType<typeof sql>) => asTenant((tx) => tx.execute(query));
    const LOOSER = /loosened only by an approved, due control change|permission denied/;
    await refusedWith(statement(sql`update freeze_trips set failures_max = 10`), LOOSER);
    await refusedWith(statement(sql`update freeze_trips set failures_window_seconds = 60`), LOOSER);
    await refusedWith(statement(sql`update freeze_trips set outflow_share_max_percent = null`), LOOSER);
    await refusedWith(
      statement(sql`update freeze_trips set failures_max = null, failures_window_seconds = null`),
      LOOSER,
    );
    await refusedWith(statement(sql`delete from freeze_trips`), /permission denied|never removed/);
    await refusedWith(
      statement(sql`insert into freeze_trips (tenant_id, asset_code, outflow_share_max_percent, updated_by)
                    values (${tenantId}::uuid, null, 90, 'mallory')
                    on conflict (tenant_id, asset_code) do update set outflow_share_max_percent = 90`),
      LOOSER,
    );
    // Tightening directly is allowed: it is what an admin does at once anyway.
    await statement(sql`update freeze_trips set failures_max = 2, outflow_share_max_percent = 30`);
    expect((await asTenant((tx) => core.listFreezeTrips(tx, tenantId))).trips).toMatchObject([
      { failuresMax: 2, failuresWindowSeconds: 600, outflowShareMaxPercent: 30 },
    ]);
  });

  it('I33-TRIP an approved loosening writes exactly the row it names, once', async () => {
    const { tenantId, alice, bob, setTrip, asTenant } = await tenantWithTrips('Trip Exact');
    await setTrip(alice, { failuresMax: 3, failuresWindowSeconds: 600, outflowShareMaxPercent: 40 });
    const loosen = await setTrip(alice, { failuresMax: 3, failuresWindowSeconds: 600 });
    // Asked again while it waits: the same proposal.
    expect((await setTrip(alice, { failuresMax: 3, failuresWindowSeconds: 600 })).proposalId).toBe(
      loosen.proposalId,
    );
    const [hash] = rowsOf<{ payload_hash: string }>(
      await asTenant((tx) =>
        tx.execute(sql`select payload_hash from proposals where proposal_id = ${loosen.proposalId}::uuid`),
      ),
    );
    await asTenant((tx) =>
      core.decideProposal(tx, {
        tenantId,
        proposalId: loosen.proposalId as string,
        staffId: bob,
        payloadHash: hash?.payload_hash as string,
        decision: 'approve',
      }),
    );
    const statement = (query: ReturnType<typeof sql>) => asTenant((tx) => tx.execute(query));
    const LOOSER = /loosened only by an approved, due control change/;
    // Approved and due, but for another row: refused.
    await refusedWith(
      statement(sql`update freeze_trips set failures_max = 9, outflow_share_max_percent = null`),
      LOOSER,
    );
    await refusedWith(statement(sql`update freeze_trips set outflow_share_max_percent = 90`), LOOSER);
    // The row it names: written (this is what the apply step does).
    await statement(sql`update freeze_trips set outflow_share_max_percent = null`);
    await asTenant((tx) => core.applyDueControlChanges(tx, tenantId));
    // Executed, it loosens nothing more.
    await statement(sql`update freeze_trips set outflow_share_max_percent = 10`);
    await refusedWith(statement(sql`update freeze_trips set outflow_share_max_percent = null`), LOOSER);
  });

  it('I33-TRIP an asset row trips that asset alone; a failures trip needs its window; an asset the tenant lacks is refused', async () => {
    const { tenantId, alice, setTrip, strand, check } = await tenantWithTrips('Trip Asset Row');
    await refusedWith(setTrip(alice, { failuresMax: 1 }), /both a count and a window/);
    await refusedWith(
      setTrip(alice, { assetCode: 'DOGE', failuresMax: 1, failuresWindowSeconds: 600 }),
      /no asset DOGE/,
    );
    await setTrip(alice, { assetCode: 'ETH', failuresMax: 0, failuresWindowSeconds: 600 });
    await strand('UNKNOWN');
    expect(await check()).toMatchObject([{ trip: 'failures:ETH', scope: 'asset', assetCode: 'ETH' }]);
    expect(await freezesInForce(tenantId)).toMatchObject([
      { scope: 'asset', asset_code: 'ETH', frozen_by: 'system:trip:failures:ETH' },
    ]);
  });
});
