import type { StaffRole } from '@idem/contracts';
import {
  createStaffUser,
  createWithdrawal,
  creditAsOperator,
  getBalances,
  leaseForSigning,
  provisionHotWallet,
  recordSigned,
  rowsOf,
  transition,
  withTenant,
} from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { approveWithdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { startSilentServer } from './support/in-process.ts';
import { evmAddress, provisionTenant, type TenantFixture, uniqueId } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp, type TrpcAnswer } from './support/staff-http.ts';

/**
 * Four-eyes proposals (I11-F5), over real HTTP: adjustments and manual credits are proposed by one signed-in
 * staff member and approved by another through `staffProposals.*`, bound to the hash shown; the
 * approval posts the journal entry, once.
 */
const ROLES = ['support', 'approver', 'operator', 'admin'] as const;

let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;
const sessions = {} as Record<StaffRole, StaffSession>;
const userIds = {} as Record<StaffRole, string>;

interface View {
  proposalId: string;
  kind: string;
  state: string;
  payloadHash: string;
  proposedBy: string;
  approvalsGiven: number;
  approvalsRequired: number;
  evidence: Record<string, unknown> | null;
  decisions: { approver: string; decision: string }[];
  result: { operationId?: string } | null;
}

const { call, signIn } = staffHttp(() => base);

function errorOf(answer: TrpcAnswer): string | undefined {
  return answer.body.error?.data.code;
}

const proposeAs = (role: StaffRole, input: unknown) =>
  call('staffProposals.propose', { mutation: true, session: sessions[role], input });
const decideAs = (role: StaffRole, p: View, decision: 'approve' | 'reject' = 'approve') =>
  call('staffProposals.decide', {
    mutation: true,
    session: sessions[role],
    input: { proposalId: p.proposalId, payloadHash: p.payloadHash, decision },
  });

/** One account's ETH balance and how many postings the tenant's journal holds. */
async function ledger(accountId: string) {
  return withTenant(database.db, tenant.tenantId, async (tx) => {
    const [postings] = rowsOf<{ n: number }>(await tx.execute(sql`select count(*)::int as n from postings`));
    const eth = (await getBalances(tx, tenant.tenantId, accountId)).find((b) => b.asset === 'ETH');
    return { available: eth?.available ?? '0', held: eth?.held ?? '0', postings: postings?.n ?? 0 };
  });
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  tenant = await provisionTenant(database.db, { name: 'Proposals over HTTP', fund: [] });
  const passwordHash = await hashPassword(PASSWORD);
  await withTenant(database.db, tenant.tenantId, async (tx) => {
    for (const role of ROLES) {
      const user = await createStaffUser(tx, {
        tenantId: tenant.tenantId,
        email: `${role}@f5.invalid`,
        role,
        passwordHash,
      });
      userIds[role] = user.userId;
    }
  });
  ({ server, base } = await startSilentServer(database));
  for (const role of ROLES) {
    sessions[role] = await signIn({
      tenantId: tenant.tenantId,
      email: `${role}@f5.invalid`,
      password: PASSWORD,
    });
  }
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('staffProposals over HTTP (I11-F5)', () => {
  it('I11-F5 a manual credit proposed by an operator is credited only when an approver approves the hash shown, once, with its entry', async () => {
    const account = uniqueId('cust');
    const input = {
      kind: 'manual_credit',
      idempotencyKey: uniqueId('mc'),
      payload: {
        accountId: account,
        asset: 'ETH',
        amountMinor: '7000',
        reference: uniqueId('custodian-record'),
        reason: 'custodian webhook lost, ticket 501',
      },
    };
    // Support and approvers do not propose.
    expect(errorOf(await proposeAs('support', input))).toBe('FORBIDDEN');
    expect(errorOf(await proposeAs('approver', input))).toBe('FORBIDDEN');

    const created = dataOf<{ outcome: string; proposal: View }>(await proposeAs('operator', input));
    expect(created).toMatchObject({
      outcome: 'CREATED',
      proposal: { kind: 'manual_credit', state: 'PENDING', proposedBy: `staff:${userIds.operator}` },
    });
    const proposal = created.proposal;
    const before = await ledger(account);
    expect(before.available).toBe('0');

    // An operator may not decide; a wrong hash binds nothing.
    expect(errorOf(await decideAs('operator', proposal))).toBe('FORBIDDEN');
    const wrongHash = await decideAs('approver', { ...proposal, payloadHash: 'b'.repeat(64) });
    expect(errorOf(wrongHash)).toBe('PAYLOAD_MISMATCH');
    expect(await ledger(account)).toEqual(before);

    const decided = dataOf<{ proposal: View }>(await decideAs('approver', proposal));
    expect(decided.proposal).toMatchObject({
      state: 'EXECUTED',
      approvalsGiven: 1,
      decisions: [{ approver: `staff:${userIds.approver}`, decision: 'approve' }],
    });
    const after = await ledger(account);
    expect(after).toEqual({ available: '7000', held: '0', postings: before.postings + 2 });

    // Approving again moves nothing.
    expect(errorOf(await decideAs('admin', proposal))).toBe('INVALID_TRANSITION');
    expect(await ledger(account)).toEqual(after);

    const operation = dataOf<{ operation: { kind: string; state: string; amountMinor: string } }>(
      await call('staff.get', {
        session: sessions.support,
        input: { operationId: decided.proposal.result?.operationId },
      }),
    );
    expect(operation.operation).toMatchObject({ kind: 'deposit', state: 'CONFIRMED', amountMinor: '7000' });
  });

  it('I11-F5 an admin proposes an adjustment and cannot approve it alone; another approves; a debit that would overdraw is refused INSUFFICIENT_FUNDS at approval with nothing written', async () => {
    const account = uniqueId('cust');
    const adjustment = (amountMinor: string) => ({
      kind: 'adjustment',
      idempotencyKey: uniqueId('adj'),
      payload: { accountId: account, asset: 'ETH', amountMinor, reason: 'goodwill credit, ticket 7781' },
    });
    const credit = dataOf<{ proposal: View }>(await proposeAs('admin', adjustment('900'))).proposal;
    expect(credit.evidence).toEqual({ balanceAtProposal: { available: '0', held: '0' } });
    // An admin holds both permissions, and still may not approve their own proposal.
    expect(errorOf(await decideAs('admin', credit))).toBe('FORBIDDEN');
    expect((await ledger(account)).available).toBe('0');
    dataOf(await decideAs('approver', credit));
    expect((await ledger(account)).available).toBe('900');

    // Two debits proposed against the same 900: the first approved leaves too little for the second.
    const first = dataOf<{ proposal: View }>(await proposeAs('operator', adjustment('-600'))).proposal;
    const second = dataOf<{ proposal: View }>(await proposeAs('operator', adjustment('-600'))).proposal;
    expect(dataOf<{ proposal: View }>(await decideAs('admin', first)).proposal.state).toBe('EXECUTED');
    const afterFirst = await ledger(account);
    expect(afterFirst.available).toBe('300');

    const refused = await decideAs('approver', second);
    expect(errorOf(refused)).toBe('INSUFFICIENT_FUNDS');
    expect(await ledger(account)).toEqual(afterFirst);
    const still = dataOf<View>(
      await call('staffProposals.get', {
        session: sessions.support,
        input: { proposalId: second.proposalId },
      }),
    );
    expect(still).toMatchObject({ state: 'PENDING', approvalsGiven: 0, decisions: [] });

    // Pending first in the queue a screen shows; the operator withdraws the stale one.
    const pending = dataOf<{ items: View[] }>(
      await call('staffProposals.list', { session: sessions.support, input: { state: 'PENDING' } }),
    );
    expect(pending.items.map((p) => p.proposalId)).toContain(second.proposalId);
    const cancelled = dataOf<View>(
      await call('staffProposals.cancel', {
        mutation: true,
        session: sessions.operator,
        input: { proposalId: second.proposalId },
      }),
    );
    expect(cancelled.state).toBe('CANCELLED');
  });
});

/** A withdrawal signed at nonce `nonce` and broadcast, as a worker leaves it (attempt 1 recorded). */
async function broadcastWithdrawal(nonce: number): Promise<string> {
  const { tenantId } = tenant;
  const reference = uniqueId('dep');
  await creditAsOperator(database.db, {
    tenantId,
    deposit: { reference, accountId: 'cust-i12', asset: 'ETH', amountMinor: '1000000' },
    idempotencyKey: `deposit-${reference}`,
    actor: 'test',
  });
  return withTenant(database.db, tenantId, async (tx) => {
    const withdrawalId = uniqueId('wd');
    const created = await createWithdrawal(tx, {
      tenantId,
      request: {
        withdrawalId,
        accountId: 'cust-i12',
        asset: 'ETH',
        destination: evmAddress(),
        amountMinor: '1000',
      },
      idempotencyKey: `withdrawal-${withdrawalId}`,
    });
    const approved = await approveWithdrawal(tx, created.operation);
    const claimed = await leaseForSigning(tx, { operation: approved, workerId: 'w', leaseMs: 30_000 });
    if (!claimed) throw new Error('claim lost');
    const signed = await recordSigned(tx, {
      tenantId,
      operationId: approved.operationId,
      leaseGeneration: claimed.leaseGeneration,
      signedArtifact: `0xbytes${nonce}`,
      txHash: `0x${nonce.toString(16).padStart(64, 'a')}`,
      chainNonce: nonce,
      workerId: 'w',
      fees: { gasLimit: 21_000n, maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n },
    });
    await transition(tx, signed, 'BROADCAST', { actor: 'w', reason: 'sent', set: { clearLease: true } });
    return approved.operationId;
  });
}

interface AttemptsView {
  attempts: { attemptNo: number; kind: string; status: string; maxFeePerGas: string }[];
  cancelApproved: boolean;
  replaceable: boolean;
}

describe('stuck withdrawals over HTTP (I12)', () => {
  it('I12-BUMP staff.attempts shows the attempts; staff.bumpFee needs the operate permission; I12-CANCEL a cancel is four eyes and stops bumps', async () => {
    await provisionHotWallet(database.db, {
      tenantId: tenant.tenantId,
      network: 'ethereum',
      address: evmAddress(),
      keyRef: 'dev:1',
    });
    const operationId = await broadcastWithdrawal(0);
    const read = () => call('staff.attempts', { session: sessions.support, input: { operationId } });
    const view = dataOf<AttemptsView>(await read());
    expect(view.attempts).toEqual([
      expect.objectContaining({
        attemptNo: 1,
        kind: 'original',
        status: 'latest',
        maxFeePerGas: '2000000000',
      }),
    ]);
    expect(view.replaceable).toBe(true);

    const bump = (role: StaffRole) =>
      call('staff.bumpFee', {
        mutation: true,
        session: sessions[role],
        input: { operationId, reason: 'stuck behind a fee spike' },
      });
    expect(errorOf(await bump('support'))).toBe('FORBIDDEN');
    expect(errorOf(await bump('approver'))).toBe('FORBIDDEN');
    expect(dataOf<{ requestId: string }>(await bump('operator')).requestId).toMatch(/^[0-9a-f-]{36}$/);

    const input = {
      kind: 'cancel_withdrawal',
      idempotencyKey: uniqueId('cancel'),
      payload: { operationId, reason: 'fraud found after sending' },
    };
    expect(errorOf(await proposeAs('support', input))).toBe('FORBIDDEN');
    const proposed = dataOf<{ proposal: View }>(await proposeAs('operator', input)).proposal;
    expect(proposed.kind).toBe('cancel_withdrawal');
    expect(errorOf(await decideAs('operator', proposed))).toBe('FORBIDDEN');
    const decided = dataOf<{ proposal: View }>(await decideAs('approver', proposed)).proposal;
    expect(decided.state).toBe('EXECUTED');
    expect(dataOf<AttemptsView>(await read()).cancelApproved).toBe(true);
    // Once a cancel is approved, no bump of the payment is signed.
    expect(errorOf(await bump('operator'))).toBe('INVALID_TRANSITION');

    const nonces = dataOf<
      { nextNonce: number; chainLatest: number | null; operations: { operationId: string }[] }[]
    >(await call('staff.nonces', { session: sessions.support }));
    expect(nonces).toHaveLength(1);
    expect(nonces[0]?.chainLatest).toBeNull();
    expect(nonces[0]?.operations.map((o) => o.operationId)).toContain(operationId);
  });
});
