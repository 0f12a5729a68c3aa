/**
 * Staff passkeys (docs/GOVERNANCE.md "Passkeys", I32-PASSKEY): a passkey is stored inactive and
 * only an approved, due control change makes it sign (the database refuses otherwise), but for the
 * trust anchor, a lone admin's first; an approver with an active passkey approves a withdrawal only
 * with an assertion over its payload hash and the decision; and every approval can be checked
 * again from the rows alone (verifyApprovalAssertions), so a decision row written without the
 * approver's device does not count.
 */
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { SoftPasskey } from '@idem/testing/passkeys';
import {
  evmAddress,
  fund,
  newTenant,
  provisionRiskPolicy,
  refusal,
  staffMembers,
  withdrawal,
} from '@idem/testing/tenants';
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decideWithdrawal } from '../src/approvals/decide.ts';
import { approvals, staffPasskeys } from '../src/db/schema/index.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import * as core from '../src/index.ts';
import { createWithdrawal } from '../src/operations/create-withdrawal.ts';
import type { Operation } from '../src/operations/operation-record.ts';
import { reviewWithdrawal } from '../src/risk/review.ts';

const ORIGIN = 'https://staff.idem.test';
const rp = core.relyingPartyOf(ORIGIN);
const SESSION = 'session-secret-of-the-test';

let t: TestDatabase;
let tenantId: string;
let adminA: string;
let adminB: string;
let approver: string;
let otherApprover: string;

const userIdOf = (actor: string) => actor.replace(/^staff:/, '');
const inTenant = <T>(work: Parameters<typeof withTenant<T>>[2], tenant = tenantId) =>
  withTenant(t.db, tenant, work);

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db, 'Passkey Exchange');
  [adminA, adminB] = (await staffMembers(t.db, tenantId, 'admin', 2)) as [string, string];
  [approver, otherApprover] = (await staffMembers(t.db, tenantId, 'approver', 2)) as [string, string];
  await core.setTenantGovernance(t.db, { tenantId, looseningDelaySeconds: 0 });
  await fund(t.db, tenantId, 'acct-1', 'ETH', 100_000n);
  await provisionRiskPolicy(t.db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: '100',
    fourEyesMinMinor: '1000',
    velocityMaxPerHour: 500,
  });
});
afterAll(() => t.dispose());

/** The database's own refusal (the driver wraps it: the reason is in the cause). */
async function refusedWith(attempt: Promise<unknown>, reason: RegExp): Promise<void> {
  const error = await attempt.then(
    () => null,
    (caught: unknown) => caught as { cause?: { message?: string } },
  );
  expect(error, 'the statement was refused').not.toBeNull();
  expect(error?.cause?.message ?? '').toMatch(reason);
}

function register(member: string, key: SoftPasskey, tenant = tenantId) {
  const userId = userIdOf(member);
  return inTenant(
    (tx) =>
      core.registerPasskey(tx, {
        tenantId: tenant,
        userId,
        label: 'laptop',
        registration: key.register(core.registrationChallenge(userId, SESSION)),
        rp,
        sessionSecret: SESSION,
      }),
    tenant,
  );
}

/** Registers `key` for `member` and has admin B (or A) approve it and the governance step apply it. */
async function activeKeyFor(member: string): Promise<SoftPasskey> {
  const key = new SoftPasskey(ORIGIN);
  const registered = await register(member, key);
  expect(registered.outcome).toBe('PROPOSED');
  const decider = member === adminB ? adminA : adminB;
  const proposal = await inTenant((tx) => core.getProposal(tx, tenantId, registered.proposalId ?? ''));
  await inTenant((tx) =>
    core.decideProposal(tx, {
      tenantId,
      proposalId: proposal.proposalId,
      staffId: decider,
      payloadHash: proposal.payloadHash,
      decision: 'approve',
    }),
  );
  const applied = await inTenant((tx) => core.applyDueControlChanges(tx, tenantId));
  expect(applied.applied).toBe(1);
  return key;
}

/** A withdrawal of `amount` the risk review leaves for one person (or two from 1000). */
async function awaitingApproval(amountMinor = '500'): Promise<Operation> {
  return inTenant(async (tx) => {
    const created = await createWithdrawal(tx, {
      tenantId,
      request: withdrawal({ amountMinor, destination: evmAddress() }),
      idempotencyKey: `k-${Math.random().toString(36).slice(2)}`,
    });
    return reviewWithdrawal(tx, created.operation);
  });
}

describe('I32-PASSKEY registering a passkey is a control change', () => {
  it('I32-PASSKEY an approver registers a passkey: stored inactive, proposed, and active only once another admin approved and the change applied', async () => {
    const key = new SoftPasskey(ORIGIN);
    const registered = await register(approver, key);
    expect(registered).toMatchObject({ outcome: 'PROPOSED', approvalsRequired: 1 });
    expect(registered.passkey.activatedAt).toBeNull();
    const proposal = await inTenant((tx) => core.getProposal(tx, tenantId, registered.proposalId ?? ''));
    expect(proposal.payload).toEqual({
      change: { control: 'passkey_register', credentialId: key.id, userId: userIdOf(approver) },
    });
    expect(proposal.proposedBy).toBe(approver);
    // The owner cannot approve their own passkey, and the approval needs an admin.
    const own = await refusal(
      inTenant((tx) =>
        core.decideProposal(tx, {
          tenantId,
          proposalId: proposal.proposalId,
          staffId: approver,
          payloadHash: proposal.payloadHash,
          decision: 'approve',
        }),
      ),
    );
    expect(own.code).toBe('FORBIDDEN');
    await inTenant((tx) =>
      core.decideProposal(tx, {
        tenantId,
        proposalId: proposal.proposalId,
        staffId: adminA,
        payloadHash: proposal.payloadHash,
        decision: 'approve',
      }),
    );
    expect(
      (await inTenant((tx) => core.listPasskeys(tx, tenantId, userIdOf(approver))))[0]?.activatedAt,
    ).toBeNull();
    expect((await inTenant((tx) => core.applyDueControlChanges(tx, tenantId))).applied).toBe(1);
    const [listed] = await inTenant((tx) => core.listPasskeys(tx, tenantId, userIdOf(approver)));
    expect(listed?.activatedAt).not.toBeNull();
  });

  it('I32-PASSKEY a registration made for another origin, or replayed from another session, is refused and nothing is stored', async () => {
    const userId = userIdOf(otherApprover);
    const elsewhere = new SoftPasskey('https://phish.example');
    const wrongOrigin = await refusal(
      inTenant((tx) =>
        core.registerPasskey(tx, {
          tenantId,
          userId,
          label: 'phished',
          registration: elsewhere.register(core.registrationChallenge(userId, SESSION)),
          rp,
          sessionSecret: SESSION,
        }),
      ),
    );
    expect(wrongOrigin.code).toBe('VALIDATION');
    const key = new SoftPasskey(ORIGIN);
    const otherSession = await refusal(
      inTenant((tx) =>
        core.registerPasskey(tx, {
          tenantId,
          userId,
          label: 'replayed',
          registration: key.register(core.registrationChallenge(userId, 'another-session')),
          rp,
          sessionSecret: SESSION,
        }),
      ),
    );
    expect(otherSession.code).toBe('VALIDATION');
    expect(await inTenant((tx) => core.listPasskeys(tx, tenantId, userId))).toEqual([]);
  });

  it('I32-PASSKEY the database refuses activating a passkey without an approved, due control change naming it, and an active insert', async () => {
    const key = new SoftPasskey(ORIGIN);
    const registered = await register(adminB, key);
    expect(registered.outcome).toBe('PROPOSED');
    // The application's role (what the server runs as) sets activated_at itself: refused.
    await refusedWith(
      inTenant((tx) =>
        tx.execute(sql`update staff_passkeys set activated_at = now()
                        where tenant_id = ${tenantId}::uuid and credential_id = ${key.id}`),
      ),
      /activated only by an approved, due control change/,
    );
    // Nor is it stored active at once, nor under an approved change naming another passkey.
    await refusedWith(
      inTenant((tx) =>
        tx.execute(sql`insert into staff_passkeys (tenant_id, credential_id, user_id, label, public_key, activated_at)
                        values (${tenantId}::uuid, 'forged-credential', ${userIdOf(adminB)}::uuid, 'x', 'AAAA', now())`),
      ),
      /stored inactive/,
    );
    const pending = await inTenant((tx) =>
      tx
        .select({ activatedAt: staffPasskeys.activatedAt })
        .from(staffPasskeys)
        .where(and(eq(staffPasskeys.tenantId, tenantId), eq(staffPasskeys.credentialId, key.id))),
    );
    expect(pending).toEqual([{ activatedAt: null }]);
  });

  it('I32-PASSKEY the trust anchor: a lone admin’s first passkey is active at once; the next one needs a second admin', async () => {
    const lone = await newTenant(t.db, 'Lone Passkey Exchange');
    const [admin] = (await staffMembers(t.db, lone, 'admin', 1)) as [string];
    const first = await register(admin, new SoftPasskey(ORIGIN), lone);
    expect(first.outcome).toBe('APPLIED');
    expect(first.passkey.activatedAt).not.toBeNull();
    const second = await refusal(register(admin, new SoftPasskey(ORIGIN), lone));
    expect(second.code).toBe('FORBIDDEN');
    expect(await inTenant((tx) => core.listPasskeys(tx, lone, userIdOf(admin)), lone)).toHaveLength(1);
  });
});

describe('I32-PASSKEY approvals carry the approver’s assertion', () => {
  let key: SoftPasskey;
  beforeAll(async () => {
    key = await activeKeyFor(otherApprover);
  });

  const decide = (op: Operation, extra: Partial<core.Decision> = {}) =>
    inTenant((tx) =>
      decideWithdrawal(tx, {
        tenantId,
        operationId: op.operationId,
        staffId: otherApprover,
        payloadHash: op.payloadHash,
        decision: 'approve',
        relyingParty: rp,
        ...extra,
      }),
    );

  it('I32-PASSKEY an approver with an active passkey is refused without an assertion, and with one over another payload hash', async () => {
    const op = await awaitingApproval();
    expect(op.state).toBe('REQUESTED');
    expect((await refusal(decide(op))).code).toBe('FORBIDDEN');
    const otherHash = 'a'.repeat(64);
    const overOther = key.assert(core.approvalChallenge(op.operationId, otherHash, 'approve'));
    const refused = await refusal(decide(op, { assertion: overOther }));
    expect(refused.code).toBe('FORBIDDEN');
    expect(refused.message).toMatch(/does not verify for this withdrawal's payload hash/);
    // A rejection's assertion approves nothing.
    const asReject = key.assert(core.approvalChallenge(op.operationId, op.payloadHash, 'reject'));
    expect((await refusal(decide(op, { assertion: asReject }))).code).toBe('FORBIDDEN');
    // Made for another origin (a phishing page's): refused.
    const phished = key.assert(
      core.approvalChallenge(op.operationId, op.payloadHash, 'approve'),
      'https://phish.example',
    );
    expect((await refusal(decide(op, { assertion: phished }))).code).toBe('FORBIDDEN');
    const rows = await inTenant((tx) =>
      tx.select().from(approvals).where(eq(approvals.operationId, op.operationId)),
    );
    expect(rows).toEqual([]);
  });

  it('I32-PASSKEY a valid assertion approves, is stored with the decision, and verifies again from the rows', async () => {
    const op = await awaitingApproval();
    const assertion = key.assert(core.approvalChallenge(op.operationId, op.payloadHash, 'approve'));
    const result = await decide(op, { assertion });
    expect(result.operation.state).toBe('APPROVED');
    const [row] = await inTenant((tx) =>
      tx.select().from(approvals).where(eq(approvals.operationId, op.operationId)),
    );
    expect(row?.passkeyAssertion).toMatchObject({
      credentialId: key.id,
      authenticatorData: assertion.response.authenticatorData,
      clientDataJSON: assertion.response.clientDataJSON,
      signature: assertion.response.signature,
      counter: expect.any(Number),
    });
    const check = await inTenant((tx) =>
      core.verifyApprovalAssertions(tx, tenantId, op.operationId, { origins: [ORIGIN] }),
    );
    expect(check).toMatchObject({ verified: [otherApprover], refused: [], sufficient: true });
    // Checked against another deployment's origin, the same rows do not verify.
    const elsewhere = await inTenant((tx) =>
      core.verifyApprovalAssertions(tx, tenantId, op.operationId, { origins: ['https://other.test'] }),
    );
    expect(elsewhere.sufficient).toBe(false);
  });

  it('I32-PASSKEY a forged decision row without a valid assertion fails verification', async () => {
    const op = await awaitingApproval('2000');
    expect(op.approvalsRequired).toBe(2);
    const valid = key.assert(core.approvalChallenge(op.operationId, op.payloadHash, 'approve'));
    await decide(op, { assertion: valid });
    const [real] = await inTenant((tx) =>
      tx.select().from(approvals).where(eq(approvals.operationId, op.operationId)),
    );
    const stored = real?.passkeyAssertion as Record<string, unknown>;
    // Whoever holds the application's login writes approvals the database cannot tell apart from
    // real ones: by a member without a passkey, none; by a member with one, their credential's id
    // with a signature made up (the database checks no signature).
    const approverKeyId = (await inTenant((tx) => core.listPasskeys(tx, tenantId, userIdOf(approver))))[0]
      ?.credentialId;
    for (const [who, assertion] of [
      [adminA, null],
      [
        approver,
        { ...stored, credentialId: approverKeyId, signature: Buffer.alloc(70, 1).toString('base64url') },
      ],
    ] as const) {
      await inTenant((tx) =>
        tx.insert(approvals).values({
          tenantId,
          operationId: op.operationId,
          approver: who,
          payloadHash: op.payloadHash,
          decision: 'approve',
          passkeyAssertion: assertion,
        }),
      );
    }
    const check = await inTenant((tx) =>
      core.verifyApprovalAssertions(tx, tenantId, op.operationId, { origins: [ORIGIN] }),
    );
    expect(check.verified).toEqual([otherApprover]);
    expect(check.refused.map((entry) => entry.approver).sort()).toEqual([adminA, approver].sort());
    expect(check.refused.find((entry) => entry.approver === adminA)?.reason).toBe('no passkey assertion');
    expect(check.refused.find((entry) => entry.approver === approver)?.reason).toMatch(/does not verify/);
    expect(check.sufficient).toBe(false);
  });

  it('I32-PASSKEY the database refuses an approval without an assertion by a member with an active passkey, and one naming another member’s passkey', async () => {
    const op = await awaitingApproval('2000');
    const [real] = await inTenant(async (tx) => {
      await decideWithdrawal(tx, {
        tenantId,
        operationId: op.operationId,
        staffId: otherApprover,
        payloadHash: op.payloadHash,
        decision: 'approve',
        relyingParty: rp,
        assertion: key.assert(core.approvalChallenge(op.operationId, op.payloadHash, 'approve')),
      });
      return tx.select().from(approvals).where(eq(approvals.operationId, op.operationId));
    });
    const row = (approver: string, passkeyAssertion: unknown) =>
      inTenant((tx) =>
        tx.insert(approvals).values({
          tenantId,
          operationId: op.operationId,
          approver,
          payloadHash: op.payloadHash,
          decision: 'approve',
          passkeyAssertion,
        }),
      );
    // `approver` has an active passkey: a row without an assertion is refused.
    await refusedWith(row(approver, null), /needs their passkey assertion/);
    // The real approver's assertion copied under another member's name names no passkey of theirs.
    await refusedWith(row(adminB, real?.passkeyAssertion), /names no active passkey of theirs/);
    await refusedWith(row(adminA, { credentialId: 'made-up' }), /names no active passkey of theirs/);
  });
});

describe('I32-PASSKEY a tenant may require a passkey for every approval', () => {
  it('I32-PASSKEY requiring passkeys applies at once; an approver without one is then refused, and only an approved change turns it off', async () => {
    const on = await inTenant((tx) =>
      core.changeGovernance(tx, { tenantId, settings: { requirePasskeyApprovals: true }, actor: adminA }),
    );
    expect(on.outcome).toBe('APPLIED');
    expect((await inTenant((tx) => core.governanceOf(tx, tenantId))).requirePasskeyApprovals).toBe(true);
    const op = await awaitingApproval();
    // adminA has no passkey: refused now, where before the setting they approved without one.
    const refused = await refusal(
      inTenant((tx) =>
        decideWithdrawal(tx, {
          tenantId,
          operationId: op.operationId,
          staffId: adminA,
          payloadHash: op.payloadHash,
          decision: 'approve',
          relyingParty: rp,
        }),
      ),
    );
    expect(refused.code).toBe('FORBIDDEN');
    expect(refused.message).toMatch(/requires a passkey for every approval/);
    // And the database refuses that row whichever path writes it.
    await refusedWith(
      inTenant((tx) =>
        tx.insert(approvals).values({
          tenantId,
          operationId: op.operationId,
          approver: adminA,
          payloadHash: op.payloadHash,
          decision: 'approve',
        }),
      ),
      /needs their passkey assertion/,
    );
    // The application's role cannot turn it off with a statement of its own.
    await refusedWith(
      inTenant((tx) =>
        tx.execute(sql`update tenant_governance set require_passkey_approvals = false
                        where tenant_id = ${tenantId}::uuid`),
      ),
      /stops requiring passkeys only through an approved control change/,
    );
    // Turning it off is a loosening: proposed, in force once another admin approved it.
    const off = await inTenant((tx) =>
      core.changeGovernance(tx, { tenantId, settings: { requirePasskeyApprovals: false }, actor: adminA }),
    );
    expect(off.outcome).toBe('PROPOSED');
    expect((await inTenant((tx) => core.governanceOf(tx, tenantId))).requirePasskeyApprovals).toBe(true);
    const proposal = await inTenant((tx) => core.getProposal(tx, tenantId, off.proposalId ?? ''));
    await inTenant((tx) =>
      core.decideProposal(tx, {
        tenantId,
        proposalId: proposal.proposalId,
        staffId: adminB,
        payloadHash: proposal.payloadHash,
        decision: 'approve',
      }),
    );
    expect((await inTenant((tx) => core.applyDueControlChanges(tx, tenantId))).applied).toBe(1);
    expect((await inTenant((tx) => core.governanceOf(tx, tenantId))).requirePasskeyApprovals).toBe(false);
  });
});
