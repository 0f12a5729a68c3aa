/**
 * The freeze switch (docs/GOVERNANCE.md "Freeze"). One member with `operate` freezes at once; a
 * freeze is lifted only when other admins approve its lift and the tenant's delay has passed. The
 * application's database login cannot lift or remove a freeze by itself: these statements are run
 * as `idem_app` with the tenant bound, exactly as the server runs its own (`withTenant`).
 */
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { ETH, fund, newTenant, staffMembers, submit, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tx } from '../src/db/connect.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import * as core from '../src/index.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.dispose());

async function refusedWith(attempt: Promise<unknown>, reason: RegExp): Promise<void> {
  const error = await attempt.then(
    () => null,
    (caught: unknown) => caught as { message?: string; cause?: { message?: string } },
  );
  expect(error, 'refused').not.toBeNull();
  expect(`${error?.message ?? ''} ${error?.cause?.message ?? ''}`).toMatch(reason);
}

async function inForce(tenantId: string): Promise<string[]> {
  const rows = rowsOf<{ freeze_id: string }>(
    await withTenant(t.db, tenantId, (tx) =>
      tx.execute(sql`select freeze_id::text from freezes where lifted_at is null order by freeze_id`),
    ),
  );
  return rows.map((row) => row.freeze_id);
}

async function payloadHashOf(tenantId: string, proposalId: string): Promise<string> {
  const [row] = rowsOf<{ payload_hash: string }>(
    await withTenant(t.db, tenantId, (tx) =>
      tx.execute(sql`select payload_hash from proposals where proposal_id = ${proposalId}::uuid`),
    ),
  );
  return row?.payload_hash ?? '';
}

describe('I33-FREEZE freezing is one member, at once', () => {
  it('I33-FREEZE an operator freezes a tenant, an asset and an account at once; support cannot', async () => {
    const tenantId = await newTenant(t.db, 'Freeze At Once');
    const [operator] = (await staffMembers(t.db, tenantId, 'operator', 1)) as [string];
    const [support] = (await staffMembers(t.db, tenantId, 'support', 1)) as [string];
    const asTenant = <T>(work: (tx: Tx) => Promise<T>) => withTenant(t.db, tenantId, work);
    const frozen = await asTenant(async (tx) => [
      await core.freeze(tx, { tenantId, actor: operator, request: { scope: 'tenant', reason: 'incident' } }),
      await core.freeze(tx, {
        tenantId,
        actor: operator,
        request: { scope: 'asset', assetCode: 'ETH', reason: 'node suspect' },
      }),
      await core.freeze(tx, {
        tenantId,
        actor: operator,
        request: { scope: 'account', accountRef: 'acct-9', reason: 'account takeover' },
      }),
    ]);
    expect(frozen.map((f) => [f.scope, f.assetCode, f.accountRef, f.frozenBy, f.liftedAt])).toEqual([
      ['tenant', null, null, operator, null],
      ['asset', 'ETH', null, operator, null],
      ['account', null, 'acct-9', operator, null],
    ]);
    // The same freeze again is the one in force, not a second.
    const again = await asTenant((tx) =>
      core.freeze(tx, { tenantId, actor: operator, request: { scope: 'tenant', reason: 'twice' } }),
    );
    expect(again.freezeId).toBe(frozen[0]?.freezeId);
    await refusedWith(
      asTenant((tx) =>
        core.freeze(tx, { tenantId, actor: support, request: { scope: 'tenant', reason: 'not mine' } }),
      ),
      /operate permission/,
    );
    await refusedWith(
      asTenant((tx) =>
        core.freeze(tx, {
          tenantId,
          actor: operator,
          request: { scope: 'asset', assetCode: 'DOGE', reason: 'x' },
        }),
      ),
      /no asset DOGE/,
    );
    expect(await inForce(tenantId)).toEqual(frozen.map((f) => f.freezeId).sort());
  });
});

describe('I33-FREEZE unfreezing needs another admin', () => {
  it('I33-FREEZE a lone admin cannot lift a freeze: the proposal is refused and the freeze stays', async () => {
    const tenantId = await newTenant(t.db, 'Freeze Lone Admin');
    const [admin] = (await staffMembers(t.db, tenantId, 'admin', 1)) as [string];
    const asTenant = <T>(work: (tx: Tx) => Promise<T>) => withTenant(t.db, tenantId, work);
    const frozen = await asTenant((tx) =>
      core.freeze(tx, { tenantId, actor: admin, request: { scope: 'tenant', reason: 'drill' } }),
    );
    await refusedWith(
      asTenant((tx) => core.proposeUnfreeze(tx, { tenantId, actor: admin, freezeId: frozen.freezeId })),
      /one admin loosens no control/,
    );
    expect(await inForce(tenantId)).toEqual([frozen.freezeId]);
  });

  it('I33-FREEZE the proposer of a lift cannot approve it; an operator cannot propose it; another admin can', async () => {
    const tenantId = await newTenant(t.db, 'Freeze Two Admins');
    const [alice, bob] = (await staffMembers(t.db, tenantId, 'admin', 2)) as [string, string];
    const [operator] = (await staffMembers(t.db, tenantId, 'operator', 1)) as [string];
    await core.setTenantGovernance(t.db, { tenantId, looseningDelaySeconds: 0 });
    const asTenant = <T>(work: (tx: Tx) => Promise<T>) => withTenant(t.db, tenantId, work);
    const frozen = await asTenant((tx) =>
      core.freeze(tx, { tenantId, actor: operator, request: { scope: 'tenant', reason: 'drill' } }),
    );
    await refusedWith(
      asTenant((tx) => core.proposeUnfreeze(tx, { tenantId, actor: operator, freezeId: frozen.freezeId })),
      /only an active admin/,
    );
    const lift = await asTenant((tx) =>
      core.proposeUnfreeze(tx, { tenantId, actor: alice, freezeId: frozen.freezeId }),
    );
    expect(lift).toMatchObject({ outcome: 'PROPOSED', approvalsRequired: 1 });
    const proposalId = lift.proposalId as string;
    // Asked again, the same lift is answered.
    expect(
      (
        await asTenant((tx) =>
          core.proposeUnfreeze(tx, { tenantId, actor: alice, freezeId: frozen.freezeId }),
        )
      ).proposalId,
    ).toBe(proposalId);
    const payloadHash = await payloadHashOf(tenantId, proposalId);
    await refusedWith(
      asTenant((tx) =>
        core.decideProposal(tx, { tenantId, proposalId, staffId: alice, payloadHash, decision: 'approve' }),
      ),
      /.+/,
    );
    // Not approved by anyone else: the governance step lifts nothing.
    await asTenant((tx) => core.applyDueControlChanges(tx, tenantId));
    expect(await inForce(tenantId)).toEqual([frozen.freezeId]);

    const decided = await asTenant((tx) =>
      core.decideProposal(tx, { tenantId, proposalId, staffId: bob, payloadHash, decision: 'approve' }),
    );
    expect(decided.proposal.state).toBe('APPROVED');
    expect(await asTenant((tx) => core.applyDueControlChanges(tx, tenantId))).toMatchObject({
      applied: 1,
      refused: 0,
    });
    expect(await inForce(tenantId)).toEqual([]);
    // The freeze stays as history, with who lifted it and through which proposal.
    const { freezes } = await asTenant((tx) => core.listFreezes(tx, tenantId));
    expect(freezes).toMatchObject([
      { freezeId: frozen.freezeId, frozenBy: operator, liftedBy: alice, liftProposalId: proposalId },
    ]);
    expect(freezes[0]?.liftedAt).not.toBeNull();
  });
});

describe('I33-FREEZE the database refuses the application role lifting or removing a freeze', () => {
  it('I33-FREEZE clearing, rewriting or deleting a freeze directly is refused; a lift only as the apply step of an approved, due change', async () => {
    const tenantId = await newTenant(t.db, 'Freeze Guarded');
    const [alice, bob] = (await staffMembers(t.db, tenantId, 'admin', 2)) as [string, string];
    await core.setTenantGovernance(t.db, { tenantId, looseningDelaySeconds: 0 });
    await fund(t.db, tenantId, 'acct-1', 'ETH', 10n * ETH);
    const asTenant = <T>(work: (tx: Tx) => Promise<T>) => withTenant(t.db, tenantId, work);
    const frozen = await asTenant((tx) =>
      core.freeze(tx, { tenantId, actor: alice, request: { scope: 'tenant', reason: 'drill' } }),
    );
    const id = frozen.freezeId;
    const statement = (query: ReturnType<typeof sql>) => asTenant((tx) => tx.execute(query));
    const NOT_APPROVED = /lifted only by an approved, due control change|permission denied/;
    const lift = (proposalId: string) =>
      statement(sql`update freezes set lifted_at = now(), lifted_by = 'mallory', lift_proposal_id = ${proposalId}::uuid
                     where freeze_id = ${id}::uuid`);
    await refusedWith(lift(crypto.randomUUID()), NOT_APPROVED);
    await refusedWith(
      statement(sql`delete from freezes where freeze_id = ${id}::uuid`),
      /permission denied|never removed/,
    );
    await refusedWith(
      statement(
        sql`update freezes set scope = 'account', account_ref = 'acct-0' where freeze_id = ${id}::uuid`,
      ),
      /permission denied|cannot be changed/,
    );
    await refusedWith(
      statement(sql`insert into freezes (tenant_id, freeze_id, scope, reason, frozen_by, lifted_at, lifted_by, lift_proposal_id)
                    values (${tenantId}::uuid, gen_random_uuid(), 'tenant', 'x', 'mallory', now(), 'mallory', gen_random_uuid())`),
      /recorded in force/,
    );
    expect(await inForce(tenantId)).toEqual([id]);

    // Proposed, not approved: still refused. Approved and due: the row lifts.
    const { proposalId } = await asTenant((tx) =>
      core.proposeUnfreeze(tx, { tenantId, actor: alice, freezeId: id }),
    );
    await refusedWith(lift(proposalId as string), NOT_APPROVED);
    const payloadHash = await payloadHashOf(tenantId, proposalId as string);
    await asTenant((tx) =>
      core.decideProposal(tx, {
        tenantId,
        proposalId: proposalId as string,
        staffId: bob,
        payloadHash,
        decision: 'approve',
      }),
    );
    // An approved lift of another freeze does not lift this one.
    const other = await asTenant((tx) =>
      core.freeze(tx, { tenantId, actor: alice, request: { scope: 'asset', assetCode: 'ETH', reason: 'y' } }),
    );
    await refusedWith(
      statement(sql`update freezes set lifted_at = now(), lifted_by = 'mallory', lift_proposal_id = ${proposalId as string}::uuid
                     where freeze_id = ${other.freezeId}::uuid`),
      NOT_APPROVED,
    );
    await lift(proposalId as string);
    expect(await inForce(tenantId)).toEqual([other.freezeId]);
    // Lifted once: never changed again, never un-lifted.
    await refusedWith(
      statement(
        sql`update freezes set lifted_at = null, lifted_by = null, lift_proposal_id = null where freeze_id = ${id}::uuid`,
      ),
      /cannot be changed/,
    );
    // Withdrawals under it meanwhile were held, not refused.
    const held = await submit(t.db, tenantId, withdrawal({ amountMinor: '1' }), 'held-1');
    const view = await asTenant((tx) => core.listFreezes(tx, tenantId));
    expect(view.held.map((h) => [h.operationId, h.heldBy])).toEqual([
      [held.operation.operationId, [other.freezeId]],
    ]);
  });
});
