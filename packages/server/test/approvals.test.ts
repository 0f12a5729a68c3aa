import { createStaffUser, getOperation, reviewWithdrawal, withTenant } from '@idem/core';
import { createIdemClient, withdrawalKey } from '@idem/sdk';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { startSilentServer } from './support/in-process.ts';
import { ETH, evmAddress, provisionTenant, type TenantFixture, uniqueId } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * Approvals (I11-F1, I11-F3), over real HTTP: the server runs with NO worker, so nothing reviews a
 * withdrawal behind the test's back; staff decide with their session cookies.
 */
const STAFF = ['operator', 'admin', 'approver1', 'approver2'] as const;
type Who = (typeof STAFF)[number];

let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;

interface Decided {
  state: string;
  approvalsGiven: number;
  approvalsRequired: number;
}
interface StaffDetail {
  operation: {
    state: string;
    payloadHash: string;
    riskFlags: string[] | null;
    approvalsRequired: number | null;
    requester: string;
    approvals: { approver: string; decision: string }[];
  };
  timeline: { toState: string; actor: string; reason: string; evidence: Record<string, unknown> | null }[];
}

const { call, signIn: signInAs } = staffHttp(() => base);
const sessions = new Map<Who, StaffSession>();
async function signIn(who: Who): Promise<StaffSession> {
  const known = sessions.get(who);
  if (known) return known;
  const session = await signInAs({
    tenantId: tenant.tenantId,
    email: `${who}@approvals.invalid`,
    password: PASSWORD,
  });
  sessions.set(who, session);
  return session;
}

async function detail(operationId: string): Promise<StaffDetail> {
  return dataOf<StaffDetail>(
    await call('staff.get', { session: await signIn('admin'), input: { operationId } }),
  );
}

async function decide(who: Who, operationId: string, payloadHash: string) {
  return call('staff.decide', {
    mutation: true,
    session: await signIn(who),
    input: { operationId, payloadHash, decision: 'approve' },
  });
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  const passwordHash = await hashPassword(PASSWORD);
  tenant = await provisionTenant(database.db, { name: 'Approvals' });
  await provisionRiskPolicy(database.db, {
    tenantId: tenant.tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: ETH.toString(),
    fourEyesMinMinor: (5n * ETH).toString(),
    velocityMaxPerHour: 1000,
    actor: 'test:setup',
  });
  await withTenant(database.db, tenant.tenantId, async (tx) => {
    for (const who of STAFF) {
      const role = who.startsWith('approver') ? 'approver' : who;
      await createStaffUser(tx, {
        tenantId: tenant.tenantId,
        email: `${who}@approvals.invalid`,
        role: role as 'operator' | 'admin' | 'approver',
        passwordHash,
      });
    }
  });
  // No worker runs in this server: a withdrawal submitted through the API stays unreviewed.
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

async function submitThroughSdk(amountMinor: bigint) {
  const sdk = createIdemClient({ baseUrl: base, apiKey: tenant.apiKey });
  const id = uniqueId('wd');
  const { outcome, withdrawal } = await sdk.withdrawals.submit(
    {
      withdrawalId: id,
      accountId: 'cust-7',
      asset: 'ETH',
      destination: evmAddress(),
      amountMinor: `${amountMinor}`,
    },
    withdrawalKey(id),
  );
  expect(outcome).toBe('CREATED');
  return withdrawal;
}

describe('I11-F1 no decision on an unreviewed withdrawal', () => {
  it('I11-F1 one approval before review does not approve a four-eyes withdrawal', async () => {
    const withdrawal = await submitThroughSdk(6n * ETH);
    const before = await detail(withdrawal.operationId);
    // Nothing reviewed it: no worker runs.
    expect([before.operation.state, before.operation.approvalsRequired]).toEqual(['REQUESTED', null]);

    const first = await decide('approver1', withdrawal.operationId, before.operation.payloadHash);
    expect(first.status).toBe(200);
    // The review ran in the decision's transaction: four eyes, and this approval is the first of two.
    expect(dataOf<Decided>(first)).toEqual({ state: 'REQUESTED', approvalsGiven: 1, approvalsRequired: 2 });
    const after = await detail(withdrawal.operationId);
    expect(after.operation.state).toBe('REQUESTED');
    expect(after.operation.riskFlags).toEqual(expect.arrayContaining(['four_eyes_amount']));
    expect(after.operation.approvalsRequired).toBe(2);
    expect(after.timeline.map((row) => row.actor)).toContain('system:risk');

    const second = await decide('approver2', withdrawal.operationId, before.operation.payloadHash);
    expect(dataOf<Decided>(second)).toEqual({ state: 'APPROVED', approvalsGiven: 2, approvalsRequired: 2 });
  });

  it('I11-F1 a decision on an unreviewed withdrawal the review would approve alone is refused and records nothing', async () => {
    const withdrawal = await submitThroughSdk(ETH / 10n);
    const before = await detail(withdrawal.operationId);
    const answer = await decide('approver1', withdrawal.operationId, before.operation.payloadHash);
    expect(answer.status).toBe(409);
    expect(answer.body.error?.data.code).toBe('INVALID_TRANSITION');
    const after = await detail(withdrawal.operationId);
    expect(after.operation.approvals).toEqual([]);
  });
});

describe('I11-F3 a staff-initiated withdrawal needs other staff members', () => {
  async function staffWithdraw(who: Who, amountMinor: bigint, onBehalfOf?: { customerRequestRef: string }) {
    const answer = await call('staff.withdraw', {
      mutation: true,
      session: await signIn(who),
      input: {
        intentId: crypto.randomUUID(),
        accountId: 'cust-7',
        asset: 'ETH',
        destination: evmAddress(),
        amountMinor: `${amountMinor}`,
        ...(onBehalfOf ? { onBehalfOf } : {}),
      },
    });
    return dataOf<{ withdrawal: { operationId: string; state: string } }>(answer).withdrawal;
  }

  /** What the review worker step does with it: `reviewWithdrawal` on the stored row. */
  async function reviewAgain(operationId: string) {
    return withTenant(database.db, tenant.tenantId, async (tx) =>
      reviewWithdrawal(tx, await getOperation(tx, tenant.tenantId, operationId)),
    );
  }

  it("I11-F3 at the holder's request a small staff withdrawal is never auto-approved; the requester cannot approve it, another staff member can", async () => {
    const small = ETH / 10n; // far below the auto-approve limit of 1 ETH
    const created = await staffWithdraw('admin', small, { customerRequestRef: 'ticket-4711' });
    expect(created.state).toBe('REQUESTED');
    expect((await reviewAgain(created.operationId)).state).toBe('REQUESTED');
    const view = await detail(created.operationId);
    expect(view.operation.riskFlags).toEqual(expect.arrayContaining(['staff_initiated']));
    expect(view.operation.approvalsRequired).toBe(1);
    // The choice is in the history, with the holder's request it refers to.
    expect(view.timeline.map((row) => row.evidence?.staffInitiated)).toContainEqual({
      onBehalfOf: { customerRequestRef: 'ticket-4711' },
    });

    const self = await decide('admin', created.operationId, view.operation.payloadHash);
    expect(self.status).toBe(403);
    expect(self.body.error?.data.detail).toContain('requester');
    const other = await decide('approver1', created.operationId, view.operation.payloadHash);
    expect(dataOf<Decided>(other)).toEqual({ state: 'APPROVED', approvalsGiven: 1, approvalsRequired: 1 });
  });

  it('I11-F3 not acting for the holder, a staff withdrawal needs two distinct other staff members', async () => {
    const created = await staffWithdraw('operator', ETH / 10n);
    expect(created.state).toBe('REQUESTED');
    expect((await reviewAgain(created.operationId)).state).toBe('REQUESTED');
    const view = await detail(created.operationId);
    expect(view.operation.approvalsRequired).toBe(2);
    expect(view.timeline.map((row) => row.evidence?.staffInitiated)).toContainEqual({ onBehalfOf: null });

    const first = await decide('approver1', created.operationId, view.operation.payloadHash);
    expect(dataOf<Decided>(first)).toEqual({ state: 'REQUESTED', approvalsGiven: 1, approvalsRequired: 2 });
    const again = await decide('approver1', created.operationId, view.operation.payloadHash);
    expect(again.body.error?.data.code).toBe('IDEMPOTENCY_CONFLICT');
    const second = await decide('admin', created.operationId, view.operation.payloadHash);
    expect(dataOf<Decided>(second)).toEqual({ state: 'APPROVED', approvalsGiven: 2, approvalsRequired: 2 });
  });
});
