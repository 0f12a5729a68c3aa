import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import {
  balanceOf,
  fund,
  newTenant,
  refusal,
  staffMember,
  strandWithdrawal,
  submit,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationTransitions } from '../src/db/schema/index.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import type { Operation } from '../src/operations/operation-record.ts';
import { getOperation } from '../src/operations/operation-record.ts';
import { decideProposal } from '../src/proposals/decide.ts';
import { propose } from '../src/proposals/propose.ts';
import { escalateOperation } from '../src/staff/runbook.ts';

let t: TestDatabase;
let tenantId: string;
/** Approvers are real, active members: only their approvals count. */
let lead: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  lead = await staffMember(t.db, tenantId, 'approver', 'lead@example.test');
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

  /** A resolution proposed by one person; it moves nothing until another approves it. */
  const proposeResolution = (
    operationId: string,
    toState: 'CONFIRMED' | 'VERIFIED_NOT_SENT',
    summary: string,
  ) =>
    actions((tx) =>
      propose(tx, {
        tenantId,
        actor: 'staff:ops',
        request: {
          kind: 'resolve_withdrawal',
          idempotencyKey: `resolve-${operationId}-${toState}`,
          payload: { operationId, toState, summary },
        },
      }),
    );
  const attested = (verdict: 'PAID' | 'NOT_SENT', txHash: string | null = null) => ({
    verdict,
    source: 'chain',
    txHash,
    observedAt: new Date().toISOString(),
    // What the rail reports of a paying transaction: the gas it paid (posted with the confirmation).
    detail:
      verdict === 'PAID'
        ? { reason: 'test', networkFeeAsset: 'ETH', networkFeeMinor: '21000' }
        : { reason: 'test' },
  });

  it('C15 I11-F4 a verified non-transfer releases the hold only with written evidence, a second person and the rail', async () => {
    const op = await stuck('FAILED_TERMINAL');
    const before = await balanceOf(t.db, tenantId, 'acct-rb');
    const tooThin = await refusal(proposeResolution(op.operationId, 'VERIFIED_NOT_SENT', 'ok'));
    expect(tooThin.code).toBe('VALIDATION');
    const { proposal } = await proposeResolution(
      op.operationId,
      'VERIFIED_NOT_SENT',
      'receipt 0xfeed shows status 0; nonce used, no value moved',
    );
    expect(await balanceOf(t.db, tenantId, 'acct-rb')).toEqual(before);
    const done = await actions((tx) =>
      decideProposal(tx, {
        tenantId,
        proposalId: proposal.proposalId,
        staffId: lead,
        payloadHash: proposal.payloadHash,
        decision: 'approve',
        attestation: attested('NOT_SENT'),
      }),
    );
    expect(done.proposal.state).toBe('EXECUTED');
    expect((await actions((tx) => getOperation(tx, tenantId, op.operationId))).state).toBe(
      'VERIFIED_NOT_SENT',
    );
    expect(await balanceOf(t.db, tenantId, 'acct-rb')).toEqual({
      available: before.available + 100n,
      held: before.held - 100n,
    });
  });

  it('C15 I11-F4 confirming an UNKNOWN withdrawal by hand records the transaction the rail found', async () => {
    const op = await stuck('UNKNOWN', null);
    const { proposal } = await proposeResolution(
      op.operationId,
      'CONFIRMED',
      'found in block 1234 with 40 confirmations',
    );
    const found = `0x${'ab'.repeat(32)}`;
    await actions((tx) =>
      decideProposal(tx, {
        tenantId,
        proposalId: proposal.proposalId,
        staffId: lead,
        payloadHash: proposal.payloadHash,
        decision: 'approve',
        attestation: attested('PAID', found),
      }),
    );
    const confirmed = await actions((tx) => getOperation(tx, tenantId, op.operationId));
    expect(confirmed.state).toBe('CONFIRMED');
    expect(confirmed.txHash).toBe(found);
  });

  it('runbook actions refuse withdrawals that do not need a person', async () => {
    const created = await submit(
      t.db,
      tenantId,
      withdrawal({ accountId: 'acct-rb', amountMinor: '5' }),
      'rb-requested',
    );
    const refused = await refusal(
      proposeResolution(created.operation.operationId, 'VERIFIED_NOT_SENT', 'nothing to see here at all'),
    );
    expect(refused.code).toBe('INVALID_TRANSITION');
    const notEscalated = await refusal(
      actions((tx) =>
        escalateOperation(tx, {
          tenantId,
          operationId: created.operation.operationId,
          owner: 'treasury-lead',
          reason: 'not stuck',
          actor: 'staff:ops',
        }),
      ),
    );
    expect(notEscalated.code).toBe('INVALID_TRANSITION');
  });
});
