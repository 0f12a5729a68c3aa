/**
 * Approvals only the approver's device can make (I32-PASSKEY), over real HTTP on the real server
 * with IDEM_PUBLIC_URL set: the relying party is that origin and its host. An approver registers a
 * passkey (inactive, proposed), the admin approves it and the governance executor applies it; then
 * the approver's decisions need an assertion made for this deployment over the withdrawal's
 * payload hash and the decision, and so do their proposal decisions (I32-TRUST), over the
 * proposal's hash. What is stored verifies again from the rows alone (verifyApprovalAssertions,
 * verifyProposalAssertions).
 */
import {
  applyDueControlChanges,
  approvalChallenge,
  createStaffUser,
  createWithdrawal,
  type Operation,
  proposalChallenge,
  reviewWithdrawal,
  setTenantGovernance,
  verifyApprovalAssertions,
  verifyProposalAssertions,
  withTenant,
} from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { SoftPasskey } from '@idem/testing/passkeys';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { startSilentServer } from './support/in-process.ts';
import { ETH, evmAddress, provisionTenant, type TenantFixture, uniqueId } from './support/provision.ts';
import { dataOf, type StaffSession, staffHttp } from './support/staff-http.ts';

const PASSWORD = 'a long enough test password';
const PUBLIC_URL = 'https://staff.passkeys.test';
const DOMAIN = 'passkeys.invalid';
let database: TestDatabase;
let server: RunningServer;
let base = '';
let tenant: TenantFixture;
const { call, signIn } = staffHttp(() => base, { origin: PUBLIC_URL });
const session = (name: string) =>
  signIn({ tenantId: tenant.tenantId, email: `${name}@${DOMAIN}`, password: PASSWORD });

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  tenant = await provisionTenant(database.db, { name: 'Passkey Approvals' });
  const passwordHash = await hashPassword(PASSWORD);
  await provisionRiskPolicy(database.db, {
    tenantId: tenant.tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: ETH.toString(),
    fourEyesMinMinor: (5n * ETH).toString(),
    velocityMaxPerHour: 1000,
    actor: 'provisioning',
  });
  await withTenant(database.db, tenant.tenantId, async (tx) => {
    for (const [name, role] of [
      ['admin1', 'admin'],
      ['admin2', 'admin'],
      ['approver', 'approver'],
    ] as const) {
      await createStaffUser(tx, {
        tenantId: tenant.tenantId,
        email: `${name}@${DOMAIN}`,
        role,
        passwordHash,
      });
    }
  });
  await setTenantGovernance(database.db, { tenantId: tenant.tenantId, looseningDelaySeconds: 0 });
  ({ server, base } = await startSilentServer(database, { IDEM_PUBLIC_URL: PUBLIC_URL }));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

/** A 2 ETH withdrawal the review leaves for one person. */
async function awaitingApproval(): Promise<Operation> {
  return withTenant(database.db, tenant.tenantId, async (tx) => {
    const { operation } = await createWithdrawal(tx, {
      tenantId: tenant.tenantId,
      request: {
        withdrawalId: uniqueId('wd'),
        accountId: 'cust-7',
        asset: 'ETH',
        destination: evmAddress(),
        amountMinor: (2n * ETH).toString(),
      },
      idempotencyKey: uniqueId('key'),
    });
    return reviewWithdrawal(tx, operation);
  });
}

describe('I32-PASSKEY approvals carry the approver’s passkey assertion', () => {
  let approver: StaffSession;
  const key = new SoftPasskey(PUBLIC_URL);

  it('I32-PASSKEY an approver’s passkey registered over HTTP waits for another admin, then signs their approvals', async () => {
    approver = await session('approver');
    const options = dataOf<{ challenge: string; rp: { id: string } }>(
      await call('staffPasskeys.registrationOptions', { mutation: true, session: approver }),
    );
    // The relying party is the deployment's public origin, whatever host the request named.
    expect(options.rp.id).toBe('staff.passkeys.test');
    const registered = dataOf<{
      outcome: string;
      proposalId: string;
      passkey: { activatedAt: string | null };
    }>(
      await call('staffPasskeys.register', {
        mutation: true,
        session: approver,
        input: { label: 'approver laptop', registration: key.register(options.challenge) },
      }),
    );
    expect(registered).toMatchObject({ outcome: 'PROPOSED', passkey: { activatedAt: null } });
    const admin = await session('admin1');
    const proposal = dataOf<{ payloadHash: string }>(
      await call('staffProposals.get', { session: admin, input: { proposalId: registered.proposalId } }),
    );
    dataOf(
      await call('staffProposals.decide', {
        mutation: true,
        session: admin,
        input: {
          proposalId: registered.proposalId,
          payloadHash: proposal.payloadHash,
          decision: 'approve',
        },
      }),
    );
    const applied = await withTenant(database.db, tenant.tenantId, (tx) =>
      applyDueControlChanges(tx, tenant.tenantId),
    );
    expect(applied.applied).toBe(1);
    const listed = dataOf<{ passkeys: { activatedAt: string | null }[] }>(
      await call('staffPasskeys.list', { session: approver }),
    );
    expect(listed.passkeys[0]?.activatedAt).not.toBeNull();
  });

  it('I32-PASSKEY a decision without an assertion, with one over another payload hash, or made for another origin is refused; the right one approves and verifies again', async () => {
    const op = await awaitingApproval();
    expect([op.state, op.approvalsRequired]).toEqual(['REQUESTED', 1]);
    const decide = (assertion?: unknown) =>
      call('staff.decide', {
        mutation: true,
        session: approver,
        input: {
          operationId: op.operationId,
          payloadHash: op.payloadHash,
          decision: 'approve',
          ...(assertion ? { assertion } : {}),
        },
      });
    const codeOf = (answer: Awaited<ReturnType<typeof decide>>) => answer.body.error?.data.code;
    expect(codeOf(await decide())).toBe('FORBIDDEN');
    const otherHash = 'c'.repeat(64);
    expect(codeOf(await decide(key.assert(approvalChallenge(op.operationId, otherHash, 'approve'))))).toBe(
      'FORBIDDEN',
    );
    expect(
      codeOf(await decide(key.assert(approvalChallenge(op.operationId, op.payloadHash, 'approve'), base))),
    ).toBe('FORBIDDEN');
    // The options the screens ask for carry exactly this challenge.
    const options = dataOf<{ challenge: string; allowCredentials: { id: string }[] }>(
      await call('staffPasskeys.approvalOptions', {
        session: approver,
        input: { operationId: op.operationId, payloadHash: op.payloadHash, decision: 'approve' },
      }),
    );
    expect(options.challenge).toBe(approvalChallenge(op.operationId, op.payloadHash, 'approve'));
    expect(options.allowCredentials.map((credential) => credential.id)).toEqual([key.id]);
    const decided = dataOf<{ state: string }>(await decide(key.assert(options.challenge)));
    expect(decided.state).toBe('APPROVED');
    const check = await withTenant(database.db, tenant.tenantId, (tx) =>
      verifyApprovalAssertions(tx, tenant.tenantId, op.operationId, { origins: [PUBLIC_URL] }),
    );
    expect(check).toMatchObject({ refused: [], sufficient: true });
    expect(check.verified).toHaveLength(1);
  });

  it('I32-TRUST the approver decides a proposal over HTTP only with their passkey: the options carry the proposal’s challenge, the decision keeps the assertion', async () => {
    const admin = await session('admin1');
    const proposed = dataOf<{ proposal: { proposalId: string; payloadHash: string } }>(
      await call('staffProposals.propose', {
        mutation: true,
        session: admin,
        input: {
          kind: 'adjustment',
          idempotencyKey: uniqueId('adjustment'),
          payload: { accountId: 'cust-7', asset: 'ETH', amountMinor: '1000', reason: 'goodwill, ticket 12' },
        },
      }),
    );
    const { proposalId, payloadHash } = proposed.proposal;
    const decide = (assertion?: unknown) =>
      call('staffProposals.decide', {
        mutation: true,
        session: approver,
        input: { proposalId, payloadHash, decision: 'approve', ...(assertion ? { assertion } : {}) },
      });
    const codeOf = (answer: Awaited<ReturnType<typeof decide>>) => answer.body.error?.data.code;
    expect(codeOf(await decide())).toBe('FORBIDDEN');
    // A withdrawal approval's challenge over the same ids, or one made on another origin: refused.
    expect(codeOf(await decide(key.assert(approvalChallenge(proposalId, payloadHash, 'approve'))))).toBe(
      'FORBIDDEN',
    );
    expect(
      codeOf(await decide(key.assert(proposalChallenge(proposalId, payloadHash, 'approve'), base))),
    ).toBe('FORBIDDEN');
    const options = dataOf<{ challenge: string; allowCredentials: { id: string }[] }>(
      await call('staffPasskeys.proposalOptions', {
        session: approver,
        input: { proposalId, payloadHash, decision: 'approve' },
      }),
    );
    expect(options.challenge).toBe(proposalChallenge(proposalId, payloadHash, 'approve'));
    expect(options.allowCredentials.map((credential) => credential.id)).toEqual([key.id]);
    const decided = dataOf<{
      proposal: { state: string; decisions: { passkeyCredentialId: string | null }[] };
    }>(await decide(key.assert(options.challenge)));
    expect(decided.proposal.state).toBe('EXECUTED');
    expect(decided.proposal.decisions.map((decision) => decision.passkeyCredentialId)).toEqual([key.id]);
    const check = await withTenant(database.db, tenant.tenantId, (tx) =>
      verifyProposalAssertions(tx, tenant.tenantId, proposalId, { origins: [PUBLIC_URL] }),
    );
    expect(check.refused).toEqual([]);
    expect(check.verified).toEqual([{ approver: expect.stringMatching(/^staff:/), credentialId: key.id }]);
  });
});
