/**
 * Proposal decisions carry the decider's passkey assertion (docs/GOVERNANCE.md "Passkeys",
 * I32-TRUST), so a passkey can be trusted along a chain: the executed `passkey_register` change that
 * activated it carries approvals whose assertions verify against passkeys trusted already.
 * A member with an active passkey decides a proposal only with an assertion over
 * proposalChallenge(proposal, payload hash, decision), checked like a withdrawal approval's (the
 * deployment's origin, user verification, a counter that moves forward) and stored with the
 * decision; verifyProposalAssertions checks every approval again from the rows alone, so a
 * decision row written without the approver's device, even by the tables' owner with every trigger
 * off, does not verify.
 */
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { SoftPasskey } from '@idem/testing/passkeys';
import { databaseRefusal, newTenant, refusal, staffMembers } from '@idem/testing/tenants';
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proposalDecisions } from '../src/db/schema/index.ts';
import { withTenant, withTenantAsConnection } from '../src/db/tenant-scope.ts';
import * as core from '../src/index.ts';

const ORIGIN = 'https://staff.idem.test';
const rp = core.relyingPartyOf(ORIGIN);
const SESSION = 'session-secret-of-the-test';

let t: TestDatabase;
let tenantId: string;
/** Five admins: control changes need one other admin's approval (quorum 2). */
let adminA: string;
let adminB: string;
let adminC: string;
let adminD: string;
let adminE: string;
/** adminA's passkey, active from the start (approved by adminB, who had none then). */
let keyA: SoftPasskey;

const userIdOf = (actor: string) => actor.replace(/^staff:/, '');
const inTenant = <T>(work: Parameters<typeof withTenant<T>>[2], tenant = tenantId) =>
  withTenant(t.db, tenant, work);

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db, 'Proposal Assertions Exchange');
  [adminA, adminB, adminC, adminD, adminE] = (await staffMembers(t.db, tenantId, 'admin', 5)) as [
    string,
    string,
    string,
    string,
    string,
  ];
  await core.setTenantGovernance(t.db, { tenantId, looseningDelaySeconds: 0 });
  keyA = new SoftPasskey(ORIGIN);
  const registered = await register(adminA, keyA);
  const proposal = await proposalOf(registered.proposalId);
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
});
afterAll(() => t.dispose());

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

const proposalOf = (proposalId: string | null, tenant = tenantId) =>
  inTenant((tx) => core.getProposal(tx, tenant, proposalId ?? ''), tenant);

/** A pending `passkey_register` change: `member` registered a new passkey and waits for an admin. */
async function pendingRegistration(member: string) {
  const key = new SoftPasskey(ORIGIN);
  const registered = await register(member, key);
  expect(registered.outcome).toBe('PROPOSED');
  return { key, proposal: await proposalOf(registered.proposalId) };
}

const decide = (
  proposal: { proposalId: string; payloadHash: string },
  staffId: string,
  extra: Partial<core.ProposalDecision> = {},
) =>
  inTenant((tx) =>
    core.decideProposal(tx, {
      tenantId,
      proposalId: proposal.proposalId,
      staffId,
      payloadHash: proposal.payloadHash,
      decision: 'approve',
      relyingParty: rp,
      ...extra,
    }),
  );

const decisionRows = (proposalId: string) =>
  inTenant((tx) =>
    tx
      .select()
      .from(proposalDecisions)
      .where(and(eq(proposalDecisions.tenantId, tenantId), eq(proposalDecisions.proposalId, proposalId))),
  );

describe('I32-TRUST proposal decisions carry the decider’s passkey assertion', () => {
  it('I32-TRUST a member with an active passkey cannot approve, nor reject, a proposal without an assertion: FORBIDDEN, nothing written', async () => {
    const { proposal } = await pendingRegistration(adminB);
    const approve = await refusal(decide(proposal, adminA));
    expect(approve.code).toBe('FORBIDDEN');
    expect(approve.message).toMatch(/active passkey/);
    const reject = await refusal(decide(proposal, adminA, { decision: 'reject', reason: 'not mine' }));
    expect(reject.code).toBe('FORBIDDEN');
    expect(await decisionRows(proposal.proposalId)).toEqual([]);
    expect((await proposalOf(proposal.proposalId)).state).toBe('PENDING');
  });

  it('I32-TRUST an assertion over another proposal’s hash, the reject challenge, a withdrawal’s challenge or another origin is refused; nothing written', async () => {
    const { proposal } = await pendingRegistration(adminC);
    const { proposal: other } = await pendingRegistration(adminD);
    const attempts = {
      'another proposal': keyA.assert(core.proposalChallenge(other.proposalId, other.payloadHash, 'approve')),
      'another hash': keyA.assert(core.proposalChallenge(proposal.proposalId, 'b'.repeat(64), 'approve')),
      'the reject challenge': keyA.assert(
        core.proposalChallenge(proposal.proposalId, proposal.payloadHash, 'reject'),
      ),
      // The same ids under the withdrawal approvals' challenge: the two never stand for each other.
      'a withdrawal approval': keyA.assert(
        core.approvalChallenge(proposal.proposalId, proposal.payloadHash, 'approve'),
      ),
      'a phishing page': keyA.assert(
        core.proposalChallenge(proposal.proposalId, proposal.payloadHash, 'approve'),
        'https://phish.example',
      ),
    };
    for (const [what, assertion] of Object.entries(attempts)) {
      const refused = await refusal(decide(proposal, adminA, { assertion }));
      expect(refused.code, what).toBe('FORBIDDEN');
      expect(refused.message, what).toMatch(/does not verify for this proposal's payload hash and decision/);
    }
    // adminB has no passkey: adminA's assertion under adminB's name names no passkey of theirs.
    const borrowed = await refusal(
      decide(proposal, adminB, {
        assertion: keyA.assert(core.proposalChallenge(proposal.proposalId, proposal.payloadHash, 'approve')),
      }),
    );
    expect(borrowed.code).toBe('FORBIDDEN');
    expect(await decisionRows(proposal.proposalId)).toEqual([]);
  });

  it('I32-TRUST a valid assertion decides, is stored with the decision, and verifies again from the rows (verifyProposalAssertions)', async () => {
    const { proposal } = await pendingRegistration(adminB);
    const options = await inTenant((tx) =>
      core.proposalAssertionOptions(tx, {
        tenantId,
        userId: userIdOf(adminA),
        proposalId: proposal.proposalId,
        payloadHash: proposal.payloadHash,
        decision: 'approve',
        rp,
      }),
    );
    expect(options?.challenge).toBe(
      core.proposalChallenge(proposal.proposalId, proposal.payloadHash, 'approve'),
    );
    expect(options?.allowCredentials?.map((credential) => credential.id)).toEqual([keyA.id]);
    // A member without an active passkey is asked for none.
    expect(
      await inTenant((tx) =>
        core.proposalAssertionOptions(tx, {
          tenantId,
          userId: userIdOf(adminE),
          proposalId: proposal.proposalId,
          payloadHash: proposal.payloadHash,
          decision: 'approve',
          rp,
        }),
      ),
    ).toBeNull();
    const assertion = keyA.assert(options?.challenge ?? '');
    const decided = await decide(proposal, adminA, { assertion });
    expect(decided.proposal.state).toBe('APPROVED');
    const [row] = await decisionRows(proposal.proposalId);
    expect(row?.passkeyAssertion).toMatchObject({
      credentialId: keyA.id,
      authenticatorData: assertion.response.authenticatorData,
      clientDataJSON: assertion.response.clientDataJSON,
      signature: assertion.response.signature,
      counter: expect.any(Number),
    });
    expect((await inTenant((tx) => core.applyDueControlChanges(tx, tenantId))).applied).toBe(1);
    const check = await inTenant((tx) =>
      core.verifyProposalAssertions(tx, tenantId, proposal.proposalId, { origins: [ORIGIN] }),
    );
    expect(check).toMatchObject({
      proposalId: proposal.proposalId,
      kind: 'control_change',
      state: 'EXECUTED',
      payloadHash: proposal.payloadHash,
      verified: [{ approver: adminA, credentialId: keyA.id }],
      refused: [],
    });
    // The caller's chain of trust: a passkey it does not trust yet does not count.
    const untrusted = await inTenant((tx) =>
      core.verifyProposalAssertions(tx, tenantId, proposal.proposalId, { origins: [ORIGIN] }, () => false),
    );
    expect(untrusted.verified).toEqual([]);
    expect(untrusted.refused).toEqual([{ approver: adminA, reason: 'not signed with a trusted passkey' }]);
    // Against another deployment's origin the same rows do not verify.
    const elsewhere = await inTenant((tx) =>
      core.verifyProposalAssertions(tx, tenantId, proposal.proposalId, { origins: ['https://other.test'] }),
    );
    expect(elsewhere.verified).toEqual([]);
  });

  it('I32-TRUST a rejection with a passkey is checked against the reject challenge and kept', async () => {
    const { proposal } = await pendingRegistration(adminE);
    const overApprove = keyA.assert(
      core.proposalChallenge(proposal.proposalId, proposal.payloadHash, 'approve'),
    );
    expect(
      (await refusal(decide(proposal, adminA, { decision: 'reject', reason: 'x', assertion: overApprove })))
        .code,
    ).toBe('FORBIDDEN');
    const assertion = keyA.assert(
      core.proposalChallenge(proposal.proposalId, proposal.payloadHash, 'reject'),
    );
    const rejected = await decide(proposal, adminA, {
      decision: 'reject',
      reason: 'unknown device',
      assertion,
    });
    expect(rejected.proposal.state).toBe('REJECTED');
    const [row] = await decisionRows(proposal.proposalId);
    expect(row).toMatchObject({ decision: 'reject', passkeyAssertion: { credentialId: keyA.id } });
  });

  it('I32-TRUST decision rows forged by the tables’ owner, with every trigger off, without or with a bogus assertion, are refused by verifyProposalAssertions', async () => {
    // adminB's passkey is active (approved with adminA's assertion above); adminD's waits.
    const keyB = (await inTenant((tx) => core.listPasskeys(tx, tenantId, userIdOf(adminB)))).find(
      (key) => key.activatedAt !== null,
    );
    expect(keyB).toBeDefined();
    const [earlier] = await inTenant((tx) =>
      tx
        .select()
        .from(proposalDecisions)
        .where(and(eq(proposalDecisions.tenantId, tenantId), eq(proposalDecisions.approver, adminA)))
        .limit(1),
    );
    const replayed = earlier?.passkeyAssertion as Record<string, unknown>;
    expect(replayed.credentialId).toBe(keyA.id);
    const { proposal } = await pendingRegistration(adminD);
    // Whoever holds the owner's login writes any row: the database's guards are off for it here.
    const forge = (approver: string, passkeyAssertion: unknown) =>
      withTenantAsConnection(t.db, tenantId, async (tx) => {
        await tx.execute(sql`set local session_replication_role = replica`);
        await tx.insert(proposalDecisions).values({
          tenantId,
          proposalId: proposal.proposalId,
          approver,
          payloadHash: proposal.payloadHash,
          decision: 'approve',
          passkeyAssertion,
        });
      });
    // adminC: no assertion at all. adminA: their real assertion over another proposal, replayed.
    // adminB: their own credential's id with a made-up signature. adminE: adminA's credential.
    await forge(adminC, null);
    await forge(adminA, replayed);
    await forge(adminB, {
      ...replayed,
      credentialId: keyB?.credentialId,
      signature: Buffer.alloc(70, 1).toString('base64url'),
    });
    await forge(adminE, replayed);
    const check = await inTenant((tx) =>
      core.verifyProposalAssertions(tx, tenantId, proposal.proposalId, { origins: [ORIGIN] }),
    );
    expect(check.verified).toEqual([]);
    const reasons = Object.fromEntries(check.refused.map((entry) => [entry.approver, entry.reason]));
    expect(reasons[adminC]).toBe('no passkey assertion');
    expect(reasons[adminA]).toMatch(/does not verify/);
    expect(reasons[adminB]).toMatch(/does not verify/);
    expect(reasons[adminE]).toBe('not signed with an active passkey of the approver');
    expect(Object.keys(reasons)).toHaveLength(4);
  });

  it('I32-TRUST the database refuses a decision without an assertion by a member with an active passkey, and an assertion naming another member’s passkey', async () => {
    const { proposal } = await pendingRegistration(adminC);
    const [real] = await inTenant(async (tx) => {
      await core.decideProposal(tx, {
        tenantId,
        proposalId: proposal.proposalId,
        staffId: adminA,
        payloadHash: proposal.payloadHash,
        decision: 'reject',
        reason: 'checked: not theirs',
        relyingParty: rp,
        assertion: keyA.assert(core.proposalChallenge(proposal.proposalId, proposal.payloadHash, 'reject')),
      });
      return tx.select().from(proposalDecisions).where(eq(proposalDecisions.proposalId, proposal.proposalId));
    });
    const { proposal: pending } = await pendingRegistration(adminE);
    const row = (approver: string, decision: 'approve' | 'reject', passkeyAssertion: unknown) =>
      inTenant((tx) =>
        tx.insert(proposalDecisions).values({
          tenantId,
          proposalId: pending.proposalId,
          approver,
          payloadHash: pending.payloadHash,
          decision,
          passkeyAssertion,
        }),
      );
    // adminB has an active passkey: a decision of theirs without an assertion is refused, either way.
    expect(await databaseRefusal(row(adminB, 'approve', null))).toMatch(/needs their passkey assertion/);
    expect(await databaseRefusal(row(adminB, 'reject', null))).toMatch(/needs their passkey assertion/);
    // adminA's assertion copied under adminC's name names no passkey of adminC's.
    expect(await databaseRefusal(row(adminC, 'approve', real?.passkeyAssertion))).toMatch(
      /names no active passkey of theirs/,
    );
    expect(await decisionRows(pending.proposalId)).toEqual([]);
  });
});

describe('I32-TRUST a tenant that requires passkeys requires them for proposal approvals too', () => {
  it('I32-TRUST an approver without a passkey is refused on a money proposal; control changes stay decidable so the tenant can register passkeys and turn it off', async () => {
    const tenant = await newTenant(t.db, 'Passkeys Required Exchange');
    const [admin1, admin2] = (await staffMembers(t.db, tenant, 'admin', 2)) as [string, string];
    const [operator] = (await staffMembers(t.db, tenant, 'operator', 1)) as [string];
    const [approver] = (await staffMembers(t.db, tenant, 'approver', 1)) as [string];
    await core.setTenantGovernance(t.db, { tenantId: tenant, looseningDelaySeconds: 0 });
    const on = await inTenant(
      (tx) =>
        core.changeGovernance(tx, {
          tenantId: tenant,
          settings: { requirePasskeyApprovals: true },
          actor: admin1,
        }),
      tenant,
    );
    expect(on.outcome).toBe('APPLIED');
    const { proposal: adjustment } = await inTenant(
      (tx) =>
        core.propose(tx, {
          tenantId: tenant,
          actor: operator,
          request: {
            kind: 'adjustment',
            idempotencyKey: 'goodwill-1',
            payload: { accountId: 'acct-1', asset: 'ETH', amountMinor: '100', reason: 'goodwill, ticket 7' },
          },
        }),
      tenant,
    );
    const decideIn = (proposal: { proposalId: string; payloadHash: string }, staffId: string) =>
      inTenant(
        (tx) =>
          core.decideProposal(tx, {
            tenantId: tenant,
            proposalId: proposal.proposalId,
            staffId,
            payloadHash: proposal.payloadHash,
            decision: 'approve',
            relyingParty: rp,
          }),
        tenant,
      );
    const refused = await refusal(decideIn(adjustment, approver));
    expect(refused.code).toBe('FORBIDDEN');
    expect(refused.message).toMatch(/requires a passkey for every approval/);
    // Whichever path writes it, the database refuses that approval too.
    expect(
      await databaseRefusal(
        inTenant(
          (tx) =>
            tx.insert(proposalDecisions).values({
              tenantId: tenant,
              proposalId: adjustment.proposalId,
              approver,
              payloadHash: adjustment.payloadHash,
              decision: 'approve',
            }),
          tenant,
        ),
      ),
    ).toMatch(/needs their passkey assertion/);
    // No admin has a passkey yet: were control changes refused too, none could ever be activated.
    const key = new SoftPasskey(ORIGIN);
    const registered = await register(admin1, key, tenant);
    expect(registered.outcome).toBe('PROPOSED');
    const decided = await decideIn(await proposalOf(registered.proposalId, tenant), admin2);
    expect(decided.proposal.state).toBe('APPROVED');
  });
});
