/**
 * Admin quorum for control changes: a change that loosens a control (a risk rule raised, a role
 * given more, a member re-enabled, the governance settings) is proposed, approved by other admins
 * and applied only after the tenant's delay, with every admin told; a tightening applies at once.
 * Each test drives core's real functions against a migrated database, as real staff members.
 */
import { ETH } from '@idem/testing/chain';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import {
  disableMember,
  fund,
  newTenant,
  provisionRiskPolicy,
  refusal,
  staffMember,
  staffMembers,
  submit,
  withdrawal,
} from '@idem/testing/tenants';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { withTenant } from '../src/db/tenant-scope.ts';
import * as core from '../src/index.ts';

let t: TestDatabase;
let tenantId: string;
let alice: string;
let bob: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db, 'Two Admins');
  [alice, bob] = (await staffMembers(t.db, tenantId, 'admin', 2)) as [string, string];
  await provisionRiskPolicy(t.db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: ETH.toString(),
    fourEyesMinMinor: (5n * ETH).toString(),
    actor: 'test',
  });
});
afterAll(() => t.dispose());

const inTenant = <T>(work: Parameters<typeof withTenant<T>>[2]) => withTenant(t.db, tenantId, work);
const ethRule = async () =>
  (await inTenant((tx) => core.listRiskRules(tx, tenantId))).rules.find((r) => r.assetCode === 'ETH');

describe('loosening a control needs other admins and a delay; tightening is immediate', () => {
  it('I31-QUORUM one admin alone raising the auto-approve limit to 1e9 is proposed, not applied', async () => {
    const result = await inTenant((tx) =>
      core.changeRiskRule(
        tx,
        tenantId,
        {
          assetCode: 'ETH',
          autoApproveMaxMinor: (10n ** 9n * ETH).toString(),
          fourEyesMinMinor: (2n * 10n ** 9n * ETH).toString(),
          velocityMaxPerHour: 10,
        },
        alice,
      ),
    );
    expect(result).toMatchObject({ outcome: 'PROPOSED', changed: false });
    expect(await ethRule()).toMatchObject({ autoApproveMaxMinor: ETH.toString() });
  });

  it('I31-QUORUM lowering a limit takes effect at once, by one admin', async () => {
    const result = await inTenant((tx) =>
      core.changeRiskRule(
        tx,
        tenantId,
        {
          assetCode: 'ETH',
          autoApproveMaxMinor: (ETH / 2n).toString(),
          fourEyesMinMinor: (4n * ETH).toString(),
          velocityMaxPerHour: 5,
        },
        alice,
      ),
    );
    expect(result).toMatchObject({ outcome: 'APPLIED', changed: true });
    expect(await ethRule()).toMatchObject({
      autoApproveMaxMinor: (ETH / 2n).toString(),
      velocityMaxPerHour: 5,
    });
  });

  it('I31-QUORUM another admin approves; the change applies only after the delay, and every admin is told', async () => {
    await core.setTenantGovernance(t.db, { tenantId, looseningDelaySeconds: 1 });
    const proposedRule = {
      assetCode: 'ETH',
      autoApproveMaxMinor: (2n * ETH).toString(),
      fourEyesMinMinor: (6n * ETH).toString(),
      velocityMaxPerHour: 20,
    };
    const result = await inTenant((tx) => core.changeRiskRule(tx, tenantId, proposedRule, alice));
    expect(result).toMatchObject({ outcome: 'PROPOSED', approvalsRequired: 1 });
    const proposal = await inTenant((tx) => core.getProposal(tx, tenantId, result.proposalId as string));
    // The proposer does not count, nor does an approver who is not an admin.
    expect((await refusal(decide(proposal, alice))).code).toBe('FORBIDDEN');
    const approver = await staffMember(t.db, tenantId, 'approver');
    expect((await refusal(decide(proposal, approver))).code).toBe('FORBIDDEN');
    const approved = await decide(proposal, bob);
    expect(approved.proposal.state).toBe('APPROVED');
    expect(approved.proposal.effectiveAt).not.toBeNull();
    expect(await ethRule()).toMatchObject({ velocityMaxPerHour: 5 });
    await vi.waitFor(
      async () => {
        const applied = await inTenant((tx) => core.applyDueControlChanges(tx, tenantId));
        expect(applied.applied).toBe(1);
      },
      { timeout: 10_000, interval: 200 },
    );
    expect(await ethRule()).toMatchObject({
      autoApproveMaxMinor: (2n * ETH).toString(),
      velocityMaxPerHour: 20,
    });
    const done = await inTenant((tx) => core.getProposal(tx, tenantId, proposal.proposalId));
    expect(done.state).toBe('EXECUTED');
    for (const admin of [alice, bob]) {
      const topics = (await inTenant((tx) => core.listNotifications(tx, tenantId, admin)))
        .filter((n) => n.proposalId === proposal.proposalId)
        .map((n) => n.topic);
      expect(topics.sort()).toEqual([
        'control_change_applied',
        'control_change_approved',
        'control_change_proposed',
      ]);
    }
  });

  it('I31-QUORUM a role that gives permissions is proposed; one that takes them away applies at once', async () => {
    const member = await staffMember(t.db, tenantId, 'support');
    const userId = member.replace('staff:', '');
    const promote = await inTenant((tx) =>
      core.changeStaffRole(tx, { tenantId, userId, role: 'admin', actor: alice }),
    );
    expect(promote.outcome).toBe('PROPOSED');
    const team = async () =>
      (await inTenant((tx) => core.listTeam(tx, tenantId))).find((m) => m.userId === userId);
    expect((await team())?.role).toBe('support');
    const operator = await staffMember(t.db, tenantId, 'operator');
    const demote = await inTenant((tx) =>
      core.changeStaffRole(tx, {
        tenantId,
        userId: operator.replace('staff:', ''),
        role: 'support',
        actor: alice,
      }),
    );
    expect(demote.outcome).toBe('APPLIED');
  });

  it('I31-QUORUM an approval by an admin disabled during the delay does not apply the change', async () => {
    const carol = await staffMember(t.db, tenantId, 'admin');
    const member = await staffMember(t.db, tenantId, 'approver');
    const userId = member.replace('staff:', '');
    await disableMember(t.db, tenantId, member);
    const result = await inTenant((tx) => core.enableStaff(tx, { tenantId, userId, actor: alice }));
    const proposal = await inTenant((tx) => core.getProposal(tx, tenantId, result.proposalId as string));
    expect((await decide(proposal, carol)).proposal.state).toBe('APPROVED');
    await disableMember(t.db, tenantId, carol);
    await vi.waitFor(
      async () => {
        const ran = await inTenant((tx) => core.applyDueControlChanges(tx, tenantId));
        expect(ran.refused).toBe(1);
      },
      { timeout: 10_000, interval: 200 },
    );
    expect((await inTenant((tx) => core.getProposal(tx, tenantId, proposal.proposalId))).state).toBe(
      'REJECTED',
    );
    const still = (await inTenant((tx) => core.listTeam(tx, tenantId))).find((m) => m.userId === userId);
    expect(still?.status).toBe('disabled');
  });

  it('I31-QUORUM a tenant with one admin loosens nothing', async () => {
    const lone = await newTenant(t.db, 'One Admin');
    const admin = await staffMember(t.db, lone, 'admin');
    const refused = await refusal(
      withTenant(t.db, lone, (tx) =>
        core.changeRiskRule(
          tx,
          lone,
          { assetCode: 'ETH', autoApproveMaxMinor: '5', fourEyesMinMinor: '10', velocityMaxPerHour: 10 },
          admin,
        ),
      ),
    );
    expect(refused.code).toBe('FORBIDDEN');
    const view = await withTenant(t.db, lone, (tx) => core.governanceView(tx, lone));
    expect(view.mode).toBe('single_admin');
  });
});

describe('single-admin mode', () => {
  it('I31-QUORUM in single-admin mode a withdrawal above the auto-approve limit cannot be approved', async () => {
    const lone = await newTenant(t.db, 'Single Admin');
    await core.setTenantGovernance(t.db, { tenantId: lone, singleAdmin: true });
    await staffMember(t.db, lone, 'admin');
    const approver = await staffMember(t.db, lone, 'approver');
    await fund(t.db, lone, 'acct-1', 'ETH', 10n * ETH);
    await provisionRiskPolicy(t.db, {
      tenantId: lone,
      assetCode: 'ETH',
      autoApproveMaxMinor: (ETH / 10n).toString(),
      fourEyesMinMinor: (5n * ETH).toString(),
      actor: 'test',
    });
    const decideOn = async (amountMinor: string) => {
      const request = withdrawal({ amountMinor });
      const created = await submit(t.db, lone, request, `key-${request.withdrawalId}`);
      const op = created.operation;
      return withTenant(t.db, lone, (tx) =>
        core.decideWithdrawal(tx, {
          tenantId: lone,
          operationId: op.operationId,
          staffId: approver,
          payloadHash: op.payloadHash,
          decision: 'approve',
        }),
      );
    };
    expect((await refusal(decideOn(ETH.toString()))).code).toBe('FORBIDDEN');
  });
});

function decide(proposal: { proposalId: string; payloadHash: string }, staffId: string) {
  return inTenant((tx) =>
    core.decideProposal(tx, {
      tenantId,
      proposalId: proposal.proposalId,
      staffId,
      payloadHash: proposal.payloadHash,
      decision: 'approve',
    }),
  );
}
