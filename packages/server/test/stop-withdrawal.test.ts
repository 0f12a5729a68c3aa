import {
  createStaffUser,
  getBalances,
  getOperation,
  leaseForSigning,
  reviewWithdrawal,
  withTenant,
} from '@idem/core';
import { createIdemClient, withdrawalKey } from '@idem/sdk';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { startSilentServer } from './support/in-process.ts';
import { ETH, evmAddress, provisionTenant, type TenantFixture, uniqueId } from './support/provision.ts';
import { PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * Stop before signing, over real HTTP: the server runs with no worker, so an APPROVED
 * withdrawal stays unclaimed until the test claims it.
 */
const STAFF = ['support', 'approver', 'operator'] as const;
type Who = (typeof STAFF)[number];

let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;

const { call, signIn: signInAs } = staffHttp(() => base);
const sessions = new Map<Who, StaffSession>();
async function signIn(who: Who): Promise<StaffSession> {
  const known = sessions.get(who);
  if (known) return known;
  const session = await signInAs({
    tenantId: tenant.tenantId,
    email: `${who}@stop.invalid`,
    password: PASSWORD,
  });
  sessions.set(who, session);
  return session;
}

const stop = async (who: Who, operationId: string, reason = 'customer asked us to stop it, ticket 4711') =>
  call('staff.stop', { mutation: true, session: await signIn(who), input: { operationId, reason } });

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  const passwordHash = await hashPassword(PASSWORD);
  tenant = await provisionTenant(database.db, { name: 'Stop' });
  await provisionRiskPolicy(database.db, {
    tenantId: tenant.tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: ETH.toString(),
    fourEyesMinMinor: (5n * ETH).toString(),
    velocityMaxPerHour: 1000,
    actor: 'test:setup',
  });
  await withTenant(database.db, tenant.tenantId, async (tx) => {
    for (const role of STAFF) {
      await createStaffUser(tx, {
        tenantId: tenant.tenantId,
        email: `${role}@stop.invalid`,
        role,
        passwordHash,
      });
    }
  });
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

/** A withdrawal submitted through the API and approved by the risk review (no worker runs). */
async function approvedWithdrawal(amountMinor = ETH / 10n) {
  const sdk = createIdemClient({ baseUrl: base, apiKey: tenant.apiKey });
  const id = uniqueId('wd');
  const { withdrawal } = await sdk.withdrawals.submit(
    {
      withdrawalId: id,
      accountId: 'cust-7',
      asset: 'ETH',
      destination: evmAddress(),
      amountMinor: `${amountMinor}`,
    },
    withdrawalKey(id),
  );
  const reviewed = await withTenant(database.db, tenant.tenantId, async (tx) =>
    reviewWithdrawal(tx, await getOperation(tx, tenant.tenantId, withdrawal.operationId)),
  );
  expect(reviewed.state).toBe('APPROVED');
  return reviewed;
}

const ethBalance = async () =>
  (await withTenant(database.db, tenant.tenantId, (tx) => getBalances(tx, tenant.tenantId, 'cust-7'))).find(
    (b) => b.asset === 'ETH',
  );

describe('I12-STUCK stop before signing through the staff API', () => {
  it('I12-STUCK an operator stops an APPROVED withdrawal: REJECTED, hold released, who and why in the history', async () => {
    const before = await ethBalance();
    const op = await approvedWithdrawal();
    expect((await ethBalance())?.held).toBe((BigInt(before?.held ?? 0) + ETH / 10n).toString());
    const answer = await stop('operator', op.operationId);
    expect(answer.status).toBe(200);
    const view = answer.body.result?.data as { state: string; rejectionCode: string | null };
    expect([view.state, view.rejectionCode]).toEqual(['REJECTED', 'STOPPED_BY_STAFF']);
    expect(await ethBalance()).toEqual(before);
    const detail = await call('staff.get', {
      session: await signIn('operator'),
      input: { operationId: op.operationId },
    });
    const data = detail.body.result?.data as
      | { timeline: { toState: string; actor: string; reason: string }[] }
      | undefined;
    const last = data?.timeline.at(-1);
    expect(last?.toState).toBe('REJECTED');
    expect(last?.actor).toMatch(/^staff:/);
    expect(last?.reason).toContain('customer asked us to stop it, ticket 4711');
    // Again: refused, nothing released twice.
    const again = await stop('approver', op.operationId);
    expect([again.status, again.body.error?.data.code]).toEqual([409, 'INVALID_TRANSITION']);
    expect(await ethBalance()).toEqual(before);
  });

  it('I12-STUCK an approver may stop too; support may not; a reason under 10 characters is refused', async () => {
    const op = await approvedWithdrawal();
    const bySupport = await stop('support', op.operationId);
    expect([bySupport.status, bySupport.body.error?.data.code]).toEqual([403, 'FORBIDDEN']);
    const short = await stop('approver', op.operationId, 'fraud');
    expect([short.status, short.body.error?.data.code]).toEqual([400, 'VALIDATION']);
    const byApprover = await stop('approver', op.operationId);
    expect(byApprover.status).toBe(200);
  });

  it('I12-STUCK a withdrawal a worker has claimed is refused as being signed; it stays SIGNING', async () => {
    const op = await approvedWithdrawal();
    await withTenant(database.db, tenant.tenantId, (tx) =>
      leaseForSigning(tx, { operation: op, workerId: 'w-test', leaseMs: 30_000 }),
    );
    const answer = await stop('operator', op.operationId);
    expect([answer.status, answer.body.error?.data.code]).toEqual([409, 'INVALID_TRANSITION']);
    expect(answer.body.error?.data.detail).toMatch(/being signed/);
    const stored = await withTenant(database.db, tenant.tenantId, (tx) =>
      getOperation(tx, tenant.tenantId, op.operationId),
    );
    expect(stored.state).toBe('SIGNING');
  });
});
