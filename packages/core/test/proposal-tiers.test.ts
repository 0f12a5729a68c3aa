/**
 * Proposals that tier and expire: how many people approve a proposal depends on the amount (the
 * asset's four-eyes threshold, as for withdrawals), a proposal expires, and at execution only the
 * approvals of members still active and still allowed to decide count. Each test drives core's
 * real propose/decide against a migrated database, as real staff members.
 */
import { randomUUID } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import {
  balanceOf,
  disableMember,
  fund,
  newTenant,
  provisionRiskPolicy,
  refusal,
  staffMember,
  staffMembers,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { decideProposal, expiryRefusal } from '../src/proposals/decide.ts';
import { propose } from '../src/proposals/propose.ts';
import { getProposal } from '../src/proposals/record.ts';
import { setTenantGovernance } from '../src/tenants/governance.ts';

let t: TestDatabase;
let tenantId: string;
let operator: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-1', 'ETH', 10_000n);
  operator = await staffMember(t.db, tenantId, 'operator');
  // Credits of 1000 minor units or more need two approvers besides the proposer.
  await provisionRiskPolicy(t.db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: '100',
    fourEyesMinMinor: '1000',
    actor: 'test',
  });
});
afterAll(() => t.dispose());

const inTenant = <T>(work: Parameters<typeof withTenant<T>>[2]) => withTenant(t.db, tenantId, work);

function proposeCredit(amountMinor: string, tenant = tenantId) {
  return withTenant(t.db, tenant, (tx) =>
    propose(tx, {
      tenantId: tenant,
      actor: operator,
      request: {
        kind: 'manual_credit',
        idempotencyKey: `tiers-${randomUUID()}`,
        payload: {
          accountId: 'acct-1',
          asset: 'ETH',
          amountMinor,
          reference: `bank-${randomUUID()}`,
          reason: 'wire seen on the bank statement',
        },
      },
    }),
  );
}

function approve(proposalId: string, staffId: string, payloadHash: string, tenant = tenantId) {
  return withTenant(t.db, tenant, (tx) =>
    decideProposal(tx, { tenantId: tenant, proposalId, staffId, payloadHash, decision: 'approve' }),
  );
}

describe('proposals tier by amount, expire, and count only active members', () => {
  it('I31-TIERS a single approval of an above-threshold credit does not execute; a second one does', async () => {
    const [first, second] = await staffMembers(t.db, tenantId, 'approver', 2);
    const { proposal } = await proposeCredit('5000');
    expect(proposal.approvalsRequired).toBe(2);
    const one = await approve(proposal.proposalId, first as string, proposal.payloadHash);
    expect(one.proposal.state).toBe('PENDING');
    expect(one.approvalsGiven).toBe(1);
    const two = await approve(proposal.proposalId, second as string, proposal.payloadHash);
    expect(two.proposal.state).toBe('EXECUTED');
  });

  it('I31-TIERS a credit below the threshold needs one approver', async () => {
    const approver = await staffMember(t.db, tenantId, 'approver');
    const { proposal } = await proposeCredit('500');
    expect(proposal.approvalsRequired).toBe(1);
    const done = await approve(proposal.proposalId, approver, proposal.payloadHash);
    expect(done.proposal.state).toBe('EXECUTED');
  });

  it('I31-TIERS an expired proposal cannot be approved and is marked expired', async () => {
    const other = await newTenant(t.db, 'Short-Lived Proposals');
    await fund(t.db, other, 'acct-1', 'ETH', 10_000n);
    const approver = await staffMember(t.db, other, 'approver');
    await setTenantGovernance(t.db, { tenantId: other, proposalTtlSeconds: 1 });
    const { proposal } = await withTenant(t.db, other, (tx) =>
      propose(tx, {
        tenantId: other,
        actor: 'staff:someone-else',
        request: {
          kind: 'adjustment',
          idempotencyKey: `tiers-${randomUUID()}`,
          payload: {
            accountId: 'acct-1',
            asset: 'ETH',
            amountMinor: '5',
            reason: 'goodwill credit, ticket 9',
          },
        },
      }),
    );
    expect(proposal.expiresAt.getTime() - proposal.createdAt.getTime()).toBe(1000);
    // The database's clock decides: wait until it has passed the proposal's expiry.
    await vi.waitFor(
      async () => {
        const passed = await withTenant(t.db, other, (tx) =>
          tx.execute(sql`select now() > ${proposal.expiresAt.toISOString()}::timestamptz as passed`),
        );
        expect(rowsOf<{ passed: boolean }>(passed)[0]?.passed).toBe(true);
      },
      { timeout: 10_000, interval: 100 },
    );
    // The decision that finds it expired marks it so (and the transport answers EXPIRED, expiryRefusal).
    const late = await approve(proposal.proposalId, approver, proposal.payloadHash, other);
    expect(late.proposal.state).toBe('EXPIRED');
    expect(expiryRefusal(late)).toEqual(expect.objectContaining({ code: 'EXPIRED' }));
    const after = await withTenant(t.db, other, (tx) => getProposal(tx, other, proposal.proposalId));
    expect(after.state).toBe('EXPIRED');
    expect(after.result).not.toHaveProperty('approvedBy');
    const again = await refusal(approve(proposal.proposalId, approver, proposal.payloadHash, other));
    expect(again.code).toBe('EXPIRED');
    expect(await balanceOf(t.db, other, 'acct-1')).toEqual({ available: 10_000n, held: 0n });
  });

  it('I31-TIERS an approval by a since-disabled member does not count at execution', async () => {
    const [early, late, third] = await staffMembers(t.db, tenantId, 'approver', 3);
    const { proposal } = await proposeCredit('7000');
    const one = await approve(proposal.proposalId, early as string, proposal.payloadHash);
    expect(one.proposal.state).toBe('PENDING');
    await disableMember(t.db, tenantId, early as string);
    const two = await approve(proposal.proposalId, late as string, proposal.payloadHash);
    expect(two.proposal.state).toBe('PENDING');
    expect(two.approvalsGiven).toBe(1);
    const three = await approve(proposal.proposalId, third as string, proposal.payloadHash);
    expect(three.proposal.state).toBe('EXECUTED');
  });

  it('I31-TIERS someone who is not a member, or may not decide, is refused and changes nothing', async () => {
    const support = await staffMember(t.db, tenantId, 'support');
    const approver = await staffMember(t.db, tenantId, 'approver');
    const { proposal } = await proposeCredit('50');
    const ghost = await refusal(approve(proposal.proposalId, 'staff:made-up', proposal.payloadHash));
    expect(ghost.code).toBe('FORBIDDEN');
    const reader = await refusal(approve(proposal.proposalId, support, proposal.payloadHash));
    expect(reader.code).toBe('FORBIDDEN');
    const real = await approve(proposal.proposalId, approver, proposal.payloadHash);
    expect(real.proposal.state).toBe('EXECUTED');
    const stored = await inTenant((tx) => getProposal(tx, tenantId, proposal.proposalId));
    expect(stored.result?.approvedBy).toEqual([approver]);
  });
});
