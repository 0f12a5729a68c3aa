import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
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
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { journalEntries, operationTransitions } from '../src/db/schema/index.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { getOperation, type Operation } from '../src/operations/operation-record.ts';
import { STOPPED_BY_STAFF, stopWithdrawal } from '../src/staff/stop-withdrawal.ts';
import { leaseForSigning } from '../src/state-machine/lease.ts';

let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase({ maxConnections: 20 });
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-stop', 'ETH', 1000n * ETH);
});
afterAll(() => t.dispose());

async function approvedWithdrawal(amount = ETH): Promise<Operation> {
  const created = await submit(
    t.db,
    tenantId,
    withdrawal({ accountId: 'acct-stop', amountMinor: amount.toString() }),
    `k-${Math.random().toString(36).slice(2)}`,
  );
  return withTenant(t.db, tenantId, (tx) => approveWithdrawal(tx, created.operation));
}

const stop = (operationId: string, reason = 'fraud found after approval (ticket 123)') =>
  withTenant(t.db, tenantId, (tx) =>
    stopWithdrawal(tx, { tenantId, operationId, actor: 'staff:stopper', reason }),
  );

async function releases(operationId: string): Promise<number> {
  const rows = await withTenant(t.db, tenantId, (tx) =>
    tx
      .select()
      .from(journalEntries)
      .where(and(eq(journalEntries.operationId, operationId), eq(journalEntries.kind, 'release'))),
  );
  return rows.length;
}

describe('stop before signing (I12)', () => {
  it('I12-STUCK stopping an APPROVED withdrawal rejects it, releases the hold exactly once and records who and why', async () => {
    const before = await balanceOf(t.db, tenantId, 'acct-stop');
    const op = await approvedWithdrawal(2n * ETH);
    const stopped = await stop(op.operationId);
    expect(stopped.state).toBe('REJECTED');
    expect(stopped.rejectionCode).toBe(STOPPED_BY_STAFF);
    expect(await balanceOf(t.db, tenantId, 'acct-stop')).toEqual(before);
    expect(await releases(op.operationId)).toBe(1);
    const history = await withTenant(t.db, tenantId, (tx) =>
      tx
        .select()
        .from(operationTransitions)
        .where(eq(operationTransitions.operationId, op.operationId))
        .orderBy(operationTransitions.seq),
    );
    const last = history.at(-1);
    expect([last?.fromState, last?.toState, last?.actor]).toEqual(['APPROVED', 'REJECTED', 'staff:stopper']);
    expect(last?.reason).toContain('fraud found after approval (ticket 123)');
    // A second stop is refused and releases nothing more.
    expect((await refusal(stop(op.operationId))).code).toBe('INVALID_TRANSITION');
    expect(await releases(op.operationId)).toBe(1);
    expect(await balanceOf(t.db, tenantId, 'acct-stop')).toEqual(before);
  });

  it('I12-STUCK a claimed (SIGNING) withdrawal cannot be stopped: refused as being signed, nothing moves', async () => {
    const op = await approvedWithdrawal();
    const claimed = await withTenant(t.db, tenantId, (tx) =>
      leaseForSigning(tx, { operation: op, workerId: 'w-1', leaseMs: 30_000 }),
    );
    expect(claimed).not.toBeNull();
    const refused = await refusal(stop(op.operationId));
    expect(refused.code).toBe('INVALID_TRANSITION');
    expect(refused.message).toMatch(/being signed/);
    const stored = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    expect(stored.state).toBe('SIGNING');
    expect(await releases(op.operationId)).toBe(0);
  });

  it('I12-STUCK a stop needs a reason of at least 10 characters and only applies to withdrawals', async () => {
    const op = await approvedWithdrawal();
    expect((await refusal(stop(op.operationId, 'too short'))).code).toBe('VALIDATION');
    expect((await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId))).state).toBe(
      'APPROVED',
    );
  });

  it.skipIf(!onPostgres)(
    'I12-STUCK a stop racing a worker claim ends stopped (never signed) or claimed (stop refused), never both (real PostgreSQL, 40 rounds)',
    async () => {
      let stoppedCount = 0;
      let claimedCount = 0;
      for (let round = 0; round < 40; round++) {
        const op = await approvedWithdrawal(ETH / 100n);
        const [stopResult, claimResult] = await Promise.allSettled([
          stop(op.operationId),
          withTenant(t.db, tenantId, (tx) =>
            leaseForSigning(tx, { operation: op, workerId: `w-${round}`, leaseMs: 30_000 }),
          ),
        ]);
        const stored = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
        const claimWon = claimResult.status === 'fulfilled' && claimResult.value !== null;
        const stopWon = stopResult.status === 'fulfilled';
        expect(claimResult.status).toBe('fulfilled');
        // Exactly one wins, and the stored state says which.
        expect(claimWon !== stopWon).toBe(true);
        if (stopWon) {
          stoppedCount += 1;
          expect(stored.state).toBe('REJECTED');
          expect(stored.leaseOwner).toBeNull();
          expect(await releases(op.operationId)).toBe(1);
        } else {
          claimedCount += 1;
          expect(stopResult.status === 'rejected' && (stopResult.reason as { code?: string }).code).toBe(
            'INVALID_TRANSITION',
          );
          expect(stored.state).toBe('SIGNING');
          expect(await releases(op.operationId)).toBe(0);
        }
      }
      console.info(`[I12-STUCK race] stopped ${stoppedCount}, claimed ${claimedCount}`);
      expect(stoppedCount + claimedCount).toBe(40);
    },
    60_000,
  );
});
