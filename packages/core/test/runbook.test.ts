import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationTransitions } from '../src/db/schema/index.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import type { Operation } from '../src/operations/operation-record.ts';
import { escalateOperation, resolveOperation } from '../src/staff/runbook.ts';
import { balanceOf, fund, newTenant, refusal, strandWithdrawal, submit, withdrawal } from './fixtures.ts';
import { createTestDatabase, type TestDatabase } from './harness.ts';

let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-rb', 'ETH', 10_000n);
});
afterAll(() => t.dispose());

/** A withdrawal driven to `to` (UNKNOWN or FAILED_TERMINAL) the way workers would. */
async function stuck(
  to: 'UNKNOWN' | 'FAILED_TERMINAL',
  txHash: string | null = '0xfeed',
): Promise<Operation> {
  const created = await submit(
    t.db,
    tenantId,
    withdrawal({ accountId: 'acct-rb', amountMinor: '100' }),
    `k-${Math.random()}`,
  );
  return withTenant(t.db, tenantId, (tx) => strandWithdrawal(tx, created.operation, to, { txHash }));
}

const actions = <T>(work: Parameters<typeof withTenant<T>>[2]) => withTenant(t.db, tenantId, work);

describe('runbook actions on withdrawals that need a person', () => {
  it('C15 escalation names the new owner and records the previous one', async () => {
    const op = await stuck('FAILED_TERMINAL');
    const escalated = await actions((tx) =>
      escalateOperation(tx, {
        tenantId,
        operationId: op.operationId,
        owner: 'treasury-lead',
        reason: 'needs a decision',
        actor: 'staff:ops',
      }),
    );
    expect(escalated.owner).toBe('treasury-lead');
    expect(escalated.state).toBe('FAILED_TERMINAL');
    const [last] = await actions((tx) =>
      tx
        .select()
        .from(operationTransitions)
        .where(sql`operation_id = ${op.operationId}`)
        .orderBy(sql`seq desc`)
        .limit(1),
    );
    expect(last?.actor).toBe('staff:ops');
    expect(last?.evidence).toEqual({ previousOwner: 'ops-oncall' });
  });

  it('C15 a verified non-transfer releases the hold only with written evidence', async () => {
    const op = await stuck('FAILED_TERMINAL');
    const before = await balanceOf(t.db, tenantId, 'acct-rb');
    const tooThin = await refusal(
      actions((tx) =>
        resolveOperation(tx, {
          tenantId,
          operationId: op.operationId,
          toState: 'VERIFIED_NOT_SENT',
          evidence: { summary: 'ok' },
          actor: 'staff:ops',
        }),
      ),
    );
    expect(tooThin.code).toBe('VALIDATION');
    expect(await balanceOf(t.db, tenantId, 'acct-rb')).toEqual(before);
    const resolved = await actions((tx) =>
      resolveOperation(tx, {
        tenantId,
        operationId: op.operationId,
        toState: 'VERIFIED_NOT_SENT',
        evidence: { summary: 'receipt 0xfeed shows status 0; nonce used, no value moved' },
        actor: 'staff:ops',
      }),
    );
    expect(resolved.state).toBe('VERIFIED_NOT_SENT');
    expect(await balanceOf(t.db, tenantId, 'acct-rb')).toEqual({
      available: before.available + 100n,
      held: before.held - 100n,
    });
  });

  it('confirming an UNKNOWN withdrawal by hand needs a transaction hash in the evidence', async () => {
    const op = await stuck('UNKNOWN', null);
    const missing = await refusal(
      actions((tx) =>
        resolveOperation(tx, {
          tenantId,
          operationId: op.operationId,
          toState: 'CONFIRMED',
          evidence: { summary: 'the custodian console shows it' },
          actor: 'staff:ops',
        }),
      ),
    );
    expect(missing.code).toBe('VALIDATION');
    const confirmed = await actions((tx) =>
      resolveOperation(tx, {
        tenantId,
        operationId: op.operationId,
        toState: 'CONFIRMED',
        evidence: { summary: 'found in block 1234 with 40 confirmations', txHash: '0xabc123' },
        actor: 'staff:ops',
      }),
    );
    expect(confirmed.state).toBe('CONFIRMED');
    expect(confirmed.txHash).toBe('0xabc123');
  });

  it('runbook actions refuse withdrawals that do not need a person', async () => {
    const created = await submit(
      t.db,
      tenantId,
      withdrawal({ accountId: 'acct-rb', amountMinor: '5' }),
      'rb-requested',
    );
    const refused = await refusal(
      actions((tx) =>
        resolveOperation(tx, {
          tenantId,
          operationId: created.operation.operationId,
          toState: 'VERIFIED_NOT_SENT',
          evidence: { summary: 'nothing to see here at all' },
          actor: 'staff:ops',
        }),
      ),
    );
    expect(refused.code).toBe('INVALID_TRANSITION');
  });
});
