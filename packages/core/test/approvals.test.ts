import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import {
  balanceOf,
  evmAddress,
  fund,
  newTenant,
  provisionRiskPolicy,
  refusal,
  staffMembers,
  withdrawal,
} from '@idem/testing/tenants';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decideWithdrawal } from '../src/approvals/decide.ts';
import { approvals } from '../src/db/schema/index.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { createWithdrawal } from '../src/operations/create-withdrawal.ts';
import { getOperation, type Operation } from '../src/operations/operation-record.ts';
import { reviewWithdrawal } from '../src/risk/review.ts';

let t: TestDatabase;
let tenantId: string;
/** Real, active approvers: the database counts only their approvals (I32-DB). */
let alice: string;
let bob: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-1', 'ETH', 10_000n);
  await provisionRiskPolicy(t.db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: '100',
    fourEyesMinMinor: '1000',
    velocityMaxPerHour: 50,
    actor: 'test',
  });
  [alice, bob] = (await staffMembers(t.db, tenantId, 'approver', 2)) as [string, string];
});
afterAll(() => t.dispose());

/**
 * A withdrawal requested by `requester` and reviewed by the risk rules. By default the account
 * holder asks (a staff requester changes the review: I11-F3).
 */
async function requested(
  amountMinor: string,
  requester = 'customer:acct-1',
  destination = evmAddress(),
  accountId = 'acct-1',
): Promise<Operation> {
  return withTenant(t.db, tenantId, async (tx) => {
    const created = await createWithdrawal(tx, {
      tenantId,
      request: withdrawal({ amountMinor, destination, accountId }),
      idempotencyKey: `k-${Math.random().toString(36).slice(2)}`,
      actor: requester,
    });
    return reviewWithdrawal(tx, created.operation);
  });
}

const decide = (
  op: Operation,
  staffId: string,
  decision: 'approve' | 'reject' = 'approve',
  payloadHash = op.payloadHash,
) =>
  withTenant(t.db, tenantId, (tx) =>
    decideWithdrawal(tx, { tenantId, operationId: op.operationId, staffId, payloadHash, decision }),
  );

describe('risk review', () => {
  it('a small withdrawal with no flags is approved by the system', async () => {
    const op = await requested('50');
    expect(op.state).toBe('APPROVED');
    expect(op.approvalsRequired).toBe(0);
  });

  it('C06 a second withdrawal with the same destination and amount is flagged for review, never merged', async () => {
    const destination = evmAddress();
    const first = await requested('60', 'customer:acct-1', destination);
    const second = await requested('60', 'customer:acct-1', destination);
    expect(first.state).toBe('APPROVED');
    expect(second.operationId).not.toBe(first.operationId);
    expect(second.state).toBe('REQUESTED');
    expect(second.riskFlags).toContain('similar_recent_withdrawal');
    expect(second.approvalsRequired).toBe(1);
  });
});

describe('four-eyes approval bound to the payload hash', () => {
  it('C24 above the threshold two distinct staff members, neither the requester, must approve', async () => {
    const op = await requested('2000');
    expect(op.approvalsRequired).toBe(2);
    const first = await decide(op, alice);
    expect(first.operation.state).toBe('REQUESTED');
    expect(first.approvalsGiven).toBe(1);
    // The same person twice does not count twice.
    expect((await refusal(decide(op, alice))).code).toBe('IDEMPOTENCY_CONFLICT');
    const second = await decide(op, bob);
    expect(second.operation.state).toBe('APPROVED');
  });

  it('C24 the requester cannot approve their own withdrawal', async () => {
    const op = await requested('500', 'staff:carol');
    const refused = await refusal(decide(op, 'staff:carol'));
    expect(refused.code).toBe('FORBIDDEN');
    const stored = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    expect(stored.state).toBe('REQUESTED');
  });

  it('C02 approving a hash that is not the stored one is refused and records nothing', async () => {
    const op = await requested('500');
    const refused = await refusal(decide(op, alice, 'approve', 'a'.repeat(64)));
    expect(refused.code).toBe('PAYLOAD_MISMATCH');
    // A real approval afterwards still counts as the first.
    const ok = await decide(op, alice);
    expect(ok.operation.state).toBe('APPROVED');
  });

  it('a rejection at review releases the hold', async () => {
    const before = await balanceOf(t.db, tenantId, 'acct-1');
    const op = await requested('700');
    const rejected = await decide(op, alice, 'reject');
    expect(rejected.operation.state).toBe('REJECTED');
    expect(await balanceOf(t.db, tenantId, 'acct-1')).toEqual(before);
  });
});

describe('staff-initiated withdrawals', () => {
  it('I11-F3 the review never approves a staff-requested withdrawal alone, whoever runs it', async () => {
    // Far below the auto-approve limit, no flags from the rules; no on-behalf record: two approvals.
    const op = await requested('50', 'staff:ops');
    expect([op.state, op.approvalsRequired]).toEqual(['REQUESTED', 2]);
    expect(op.riskFlags).toEqual(['staff_initiated']);
    expect((await refusal(decide(op, 'staff:ops'))).code).toBe('FORBIDDEN');
    expect((await decide(op, alice)).operation.state).toBe('REQUESTED');
    expect((await decide(op, bob)).operation.state).toBe('APPROVED');
  });
});

describe.skipIf(!onPostgres)('decisions at the same moment (real PostgreSQL, separate connections)', () => {
  it('I11-F2 two approvers deciding at the same moment always complete it', async () => {
    await fund(t.db, tenantId, 'acct-race', 'ETH', 1_000_000n);
    const outcomes: { round: number; state: string; approvals: number }[] = [];
    for (let round = 0; round < 30; round += 1) {
      const op = await requested('2000', 'customer:acct-race', evmAddress(), 'acct-race');
      expect(op.approvalsRequired).toBe(2);
      // Two transactions on two pooled connections, started together.
      const decided = await Promise.allSettled([decide(op, alice), decide(op, bob)]);
      expect(decided.map((d) => d.status)).toEqual(['fulfilled', 'fulfilled']);
      const stored = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
      const given = await t.db
        .select()
        .from(approvals)
        .where(and(eq(approvals.tenantId, tenantId), eq(approvals.operationId, op.operationId)));
      outcomes.push({ round, state: stored.state, approvals: given.length });
    }
    expect(outcomes.filter((o) => o.state !== 'APPROVED' || o.approvals !== 2)).toEqual([]);
  });
});
