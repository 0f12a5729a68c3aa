import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import {
  approveWithdrawal,
  balanceOf,
  ETH,
  fund,
  newTenant,
  refusal,
  submit,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationTransitions } from '../src/db/schema/index.ts';
import { withTenant, withTenantAsConnection } from '../src/db/tenant-scope.ts';
import { createWithdrawal } from '../src/operations/create-withdrawal.ts';
import { getOperation, type Operation } from '../src/operations/operation-record.ts';
import { recordAdjustment, recordDeposit } from '../src/operations/record-credit.ts';
import { leaseForSigning, recordSigned } from '../src/state-machine/lease.ts';
import { transition } from '../src/state-machine/transition.ts';
import { allowedNext } from '../src/state-machine/transitions.ts';

let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
});
afterAll(() => t.dispose());

const move = (
  op: Operation,
  to: Operation['state'],
  extra: Parameters<typeof transition>[3] = { actor: 'test', reason: 'test' },
) => withTenant(t.db, tenantId, (tx) => transition(tx, op, to, extra));

const approve = (op: Operation) => withTenant(t.db, tenantId, (tx) => approveWithdrawal(tx, op));

/** Drives a fresh withdrawal of `amount` from `account` to SIGNED, the way a worker would. */
async function signedWithdrawal(account: string, amount: bigint): Promise<Operation> {
  const created = await submit(
    t.db,
    tenantId,
    withdrawal({ accountId: account, amountMinor: amount.toString() }),
    `k-${Math.random()}`,
  );
  const approved = await approve(created.operation);
  return withTenant(t.db, tenantId, async (tx) => {
    const claimed = await leaseForSigning(tx, { operation: approved, workerId: 'w', leaseMs: 30_000 });
    if (!claimed) throw new Error('claim lost');
    return recordSigned(tx, {
      tenantId,
      operationId: approved.operationId,
      leaseGeneration: claimed.leaseGeneration,
      signedArtifact: '0xsigned',
      txHash: `0x${Math.random().toString(16).slice(2)}`,
      workerId: 'w',
    });
  });
}

describe('the withdrawal state machine and its postings', () => {
  it('a confirmed withdrawal consumes the hold into the custody account', async () => {
    await fund(t.db, tenantId, 'acct-life', 'ETH', ETH);
    const signed = await signedWithdrawal('acct-life', 400n);
    expect(await balanceOf(t.db, tenantId, 'acct-life')).toEqual({ available: ETH - 400n, held: 400n });
    const broadcast = await move(signed, 'BROADCAST');
    const confirmed = await move(broadcast, 'CONFIRMED', {
      actor: 'chain-watcher',
      reason: '12 confirmations',
      evidence: { blockNumber: 1 },
    });
    expect(confirmed.state).toBe('CONFIRMED');
    expect(await balanceOf(t.db, tenantId, 'acct-life')).toEqual({ available: ETH - 400n, held: 0n });
    const history = await withTenant(t.db, tenantId, (tx) =>
      tx
        .select()
        .from(operationTransitions)
        .where(sql`operation_id = ${signed.operationId}`)
        .orderBy(operationTransitions.seq),
    );
    expect(history.map((h) => h.toState)).toEqual([
      'REQUESTED',
      // The risk review's record (approvals needed), before the approval the database accepts.
      'REQUESTED',
      'APPROVED',
      'SIGNING',
      'SIGNED',
      'BROADCAST',
      'CONFIRMED',
    ]);
    expect(history.at(-1)?.actor).toBe('chain-watcher');
  });

  it('C13 UNKNOWN posts nothing and keeps the hold; only evidence releases it', async () => {
    await fund(t.db, tenantId, 'acct-unknown', 'ETH', 1000n);
    const signed = await signedWithdrawal('acct-unknown', 600n);
    const unknown = await move(signed, 'UNKNOWN', { actor: 'w', reason: 'broadcast timed out' });
    expect(await balanceOf(t.db, tenantId, 'acct-unknown')).toEqual({ available: 400n, held: 600n });
    // No edge leads from UNKNOWN back to signing or approval: nothing can be sent afresh.
    expect(allowedNext('withdrawal', 'UNKNOWN')).toEqual(['BROADCAST', 'CONFIRMED', 'VERIFIED_NOT_SENT']);
    expect((await refusal(move(unknown, 'APPROVED'))).code).toBe('INVALID_TRANSITION');
    await move(unknown, 'VERIFIED_NOT_SENT', {
      actor: 'system:reconciler',
      reason: 'nonce consumed by another transaction',
      evidence: { nonce: 7 },
    });
    expect(await balanceOf(t.db, tenantId, 'acct-unknown')).toEqual({ available: 1000n, held: 0n });
  });

  it('C15 FAILED_TERMINAL keeps the hold and records its owner', async () => {
    await fund(t.db, tenantId, 'acct-failed', 'ETH', 1000n);
    const broadcast = await move(await signedWithdrawal('acct-failed', 300n), 'BROADCAST');
    const failed = await move(broadcast, 'FAILED_TERMINAL', {
      actor: 'system:reconciler',
      reason: 'dropped and not found after the reconciliation window',
      set: { owner: 'ops-oncall' },
    });
    expect(failed.owner).toBe('ops-oncall');
    expect(await balanceOf(t.db, tenantId, 'acct-failed')).toEqual({ available: 700n, held: 300n });
  });

  it('C17 a reorganisation returns a confirmed withdrawal to BROADCAST and restores the hold', async () => {
    await fund(t.db, tenantId, 'acct-reorg', 'ETH', 1000n);
    const confirmed = await move(
      await move(await signedWithdrawal('acct-reorg', 250n), 'BROADCAST'),
      'CONFIRMED',
    );
    expect(await balanceOf(t.db, tenantId, 'acct-reorg')).toEqual({ available: 750n, held: 0n });
    const back = await move(confirmed, 'BROADCAST', {
      actor: 'chain-watcher',
      reason: 'reorg removed block',
      evidence: { blockHash: '0xabc' },
    });
    expect(back.state).toBe('BROADCAST');
    expect(back.settledAt).toBeNull();
    expect(await balanceOf(t.db, tenantId, 'acct-reorg')).toEqual({ available: 750n, held: 250n });
  });

  it('a rejected request releases its hold', async () => {
    await fund(t.db, tenantId, 'acct-reject', 'ETH', 1000n);
    const created = await submit(
      t.db,
      tenantId,
      withdrawal({ accountId: 'acct-reject', amountMinor: '900' }),
      'reject-k',
    );
    await move(created.operation, 'REJECTED', { actor: 'staff:a', reason: 'risk' });
    expect(await balanceOf(t.db, tenantId, 'acct-reject')).toEqual({ available: 1000n, held: 0n });
  });

  it('a transition from a stale read is refused and writes nothing', async () => {
    await fund(t.db, tenantId, 'acct-stale', 'ETH', 1000n);
    const created = await submit(
      t.db,
      tenantId,
      withdrawal({ accountId: 'acct-stale', amountMinor: '10' }),
      'stale-k',
    );
    await approve(created.operation);
    const stale = await refusal(move(created.operation, 'REJECTED'));
    expect(stale.code).toBe('STALE_WRITE');
    expect(await balanceOf(t.db, tenantId, 'acct-stale')).toEqual({ available: 990n, held: 10n });
  });

  it('every edge outside the table is refused with INVALID_TRANSITION', async () => {
    await fund(t.db, tenantId, 'acct-edges', 'ETH', 1000n);
    const created = await submit(
      t.db,
      tenantId,
      withdrawal({ accountId: 'acct-edges', amountMinor: '10' }),
      'edges-k',
    );
    for (const to of [
      'SIGNED',
      'BROADCAST',
      'UNKNOWN',
      'CONFIRMED',
      'VERIFIED_NOT_SENT',
      'FAILED_TERMINAL',
    ] as const) {
      expect((await refusal(move(created.operation, to))).code).toBe('INVALID_TRANSITION');
    }
  });
});

describe('the signer recomputes the approved hash', () => {
  it('C02 a field changed in the database after approval makes signing refuse', async () => {
    await fund(t.db, tenantId, 'acct-tamper', 'ETH', 1000n);
    const created = await submit(
      t.db,
      tenantId,
      withdrawal({ accountId: 'acct-tamper', amountMinor: '100' }),
      'tamper-k',
    );
    const approved = await approve(created.operation);
    const claimed = await withTenant(t.db, tenantId, (tx) =>
      leaseForSigning(tx, { operation: approved, workerId: 'w', leaseMs: 30_000 }),
    );
    // An attacker with table-owner access bypasses the guard trigger and edits the destination.
    await t.db.transaction(async (tx) => {
      await tx.execute(sql`set local session_replication_role = replica`);
      await tx.execute(
        sql`update operations set destination = '0x000000000000000000000000000000000000dEaD' where operation_id = ${approved.operationId}`,
      );
    });
    const refused = await refusal(
      withTenant(t.db, tenantId, (tx) =>
        recordSigned(tx, {
          tenantId,
          operationId: approved.operationId,
          leaseGeneration: claimed?.leaseGeneration ?? 0,
          signedArtifact: '0xsigned',
          txHash: '0xhash',
          workerId: 'w',
        }),
      ),
    );
    expect(refused.code).toBe('PAYLOAD_MISMATCH');
    const stored = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, approved.operationId));
    expect(stored.state).toBe('SIGNING');
    expect(stored.signedArtifact).toBeNull();
  });
});

describe('support and admin paths go through the same identity path', () => {
  it('C24 an admin re-drive of a stuck withdrawal cannot mint a new operation', async () => {
    await fund(t.db, tenantId, 'acct-stuck', 'ETH', 1000n);
    const request = withdrawal({ accountId: 'acct-stuck', amountMinor: '100' });
    const created = await submit(t.db, tenantId, request, `withdrawal-${request.withdrawalId}`);
    const approved = await approve(created.operation);
    const signed = await withTenant(t.db, tenantId, async (tx) => {
      const claimed = await leaseForSigning(tx, { operation: approved, workerId: 'w', leaseMs: 30_000 });
      if (!claimed) throw new Error('claim lost');
      return recordSigned(tx, {
        tenantId,
        operationId: approved.operationId,
        leaseGeneration: claimed.leaseGeneration,
        signedArtifact: '0xsigned',
        txHash: '0xstuck',
        workerId: 'w',
      });
    });
    const stuck = await move(signed, 'UNKNOWN', { actor: 'w', reason: 'broadcast timed out' });
    expect(stuck.state).toBe('UNKNOWN');
    // An admin "re-drives" it by submitting the same withdrawal again under a key of their own.
    const redrive = await refusal(
      withTenant(t.db, tenantId, (tx) =>
        createWithdrawal(tx, { tenantId, request, idempotencyKey: 'admin-redrive-1', actor: 'staff:admin' }),
      ),
    );
    expect(redrive.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(redrive.details.holderKey).toBe(`withdrawal-${request.withdrawalId}`);
    // Under the original key it answers IN_FLIGHT: the outcome is being reconciled, nothing is sent.
    const retry = await refusal(submit(t.db, tenantId, request, `withdrawal-${request.withdrawalId}`));
    expect(retry.code).toBe('IN_FLIGHT');
    expect(await balanceOf(t.db, tenantId, 'acct-stuck')).toEqual({ available: 900n, held: 100n });
  });
});

// Deposits credited here have no chain or custodian evidence: recorded as the deployment's own tools
// would (the tables' owner), which the database accepts without it (I32-DB).
describe('deposits and manual adjustments go through the same identity and journal path', () => {
  it('C24 a deposit replays under its key and a second key for the same reference is refused', async () => {
    const deposit = { reference: 'chain-0xaaa-0', accountId: 'acct-dep', asset: 'ETH', amountMinor: '500' };
    const first = await withTenantAsConnection(t.db, tenantId, (tx) =>
      recordDeposit(tx, { tenantId, deposit, idempotencyKey: 'deposit-0xaaa-0', actor: 'chain-watcher' }),
    );
    const again = await withTenantAsConnection(t.db, tenantId, (tx) =>
      recordDeposit(tx, { tenantId, deposit, idempotencyKey: 'deposit-0xaaa-0', actor: 'chain-watcher' }),
    );
    const otherKey = await refusal(
      withTenantAsConnection(t.db, tenantId, (tx) =>
        recordDeposit(tx, { tenantId, deposit, idempotencyKey: 'manual-credit-1', actor: 'staff:x' }),
      ),
    );
    expect(first.outcome).toBe('CREATED');
    expect(again.outcome).toBe('REPLAYED');
    expect(otherKey.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(otherKey.details.holderKey).toBe('deposit-0xaaa-0');
    expect(await balanceOf(t.db, tenantId, 'acct-dep')).toEqual({ available: 500n, held: 0n });
  });

  it('C24 a debit adjustment cannot overdraw and leaves no operation behind', async () => {
    await fund(t.db, tenantId, 'acct-adj', 'ETH', 100n);
    const adjustment = {
      reference: 'adj-1',
      accountId: 'acct-adj',
      asset: 'ETH',
      amountMinor: '-101',
      reason: 'fee correction',
    };
    const refused = await refusal(
      withTenant(t.db, tenantId, (tx) =>
        recordAdjustment(tx, { tenantId, adjustment, idempotencyKey: 'adj-key-1', actor: 'staff:admin' }),
      ),
    );
    expect(refused.code).toBe('INSUFFICIENT_FUNDS');
    const ok = await withTenant(t.db, tenantId, (tx) =>
      recordAdjustment(tx, {
        tenantId,
        adjustment: { ...adjustment, amountMinor: '-40' },
        idempotencyKey: 'adj-key-1',
        actor: 'staff:admin',
      }),
    );
    expect(ok.outcome).toBe('CREATED');
    expect(await balanceOf(t.db, tenantId, 'acct-adj')).toEqual({ available: 60n, held: 0n });
  });
});
