/**
 * The governance settings (admin quorum, loosening delay, proposal lifetime) decide how hard every
 * other control is to loosen, so the database guards them too: the application's role writes them
 * only as the apply step of a governance control change the other admins approved and waited out.
 * Whoever holds the application's login cannot lower the delay or the quorum with one statement.
 */
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { newTenant, staffMembers } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { withTenant } from '../src/db/tenant-scope.ts';
import * as core from '../src/index.ts';

let t: TestDatabase;
let tenantId: string;
let alice: string;
let bob: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db, 'Guarded Governance');
  [alice, bob] = (await staffMembers(t.db, tenantId, 'admin', 2)) as [string, string];
  // The deployment's own tools (the owner role) set the settings directly.
  await core.setTenantGovernance(t.db, { tenantId, looseningDelaySeconds: 1 });
});
afterAll(() => t.dispose());

const inTenant = <T>(work: Parameters<typeof withTenant<T>>[2]) => withTenant(t.db, tenantId, work);

/** The database's own refusal (the driver wraps it: the statement is in the message, the reason in the cause). */
async function refusedWith(attempt: Promise<unknown>, reason: RegExp): Promise<void> {
  const error = await attempt.then(
    () => null,
    (caught: unknown) => caught as { cause?: { message?: string } },
  );
  expect(error, 'the statement was refused').not.toBeNull();
  expect(error?.cause?.message ?? '').toMatch(reason);
}
const NOT_APPROVED = /change only through an approved control change/;

describe('the database guards the governance settings', () => {
  it('I31-QUORUM the application role cannot change the governance settings with a statement of its own', async () => {
    await refusedWith(
      inTenant((tx) =>
        tx.execute(sql`update tenant_governance set loosening_delay_seconds = 0, admin_quorum = 2
                        where tenant_id = ${tenantId}::uuid`),
      ),
      NOT_APPROVED,
    );
    const other = await newTenant(t.db, 'Unset Governance');
    // Entering single-admin mode only restricts: allowed. Leaving it, or any number, is not.
    await refusedWith(
      withTenant(t.db, other, (tx) =>
        tx.execute(sql`insert into tenant_governance (tenant_id, loosening_delay_seconds)
                        values (${other}::uuid, 0)`),
      ),
      NOT_APPROVED,
    );
    await withTenant(t.db, other, (tx) =>
      tx.execute(sql`insert into tenant_governance (tenant_id, single_admin) values (${other}::uuid, true)`),
    );
    await refusedWith(
      withTenant(t.db, other, (tx) =>
        tx.execute(sql`update tenant_governance set single_admin = false where tenant_id = ${other}::uuid`),
      ),
      /stays in single-admin mode/,
    );
    expect(await inTenant((tx) => core.governanceOf(tx, tenantId))).toMatchObject({
      looseningDelaySeconds: 1,
    });
  });

  it('I31-QUORUM a governance change applies through its approved, waited-out proposal, and only as proposed', async () => {
    const { proposal } = await inTenant((tx) =>
      core.proposeControlChange(tx, {
        tenantId,
        actor: alice,
        change: { control: 'governance', settings: { proposalTtlSeconds: 7_200 } },
      }),
    );
    const approved = await inTenant((tx) =>
      core.decideProposal(tx, {
        tenantId,
        proposalId: proposal.proposalId,
        staffId: bob,
        payloadHash: proposal.payloadHash,
        decision: 'approve',
      }),
    );
    expect(approved.proposal.state).toBe('APPROVED');
    // Approved but not yet effective, or asking for more than was proposed: still refused.
    await refusedWith(
      inTenant((tx) =>
        tx.execute(sql`update tenant_governance set proposal_ttl_seconds = 7200, loosening_delay_seconds = 0
                        where tenant_id = ${tenantId}::uuid`),
      ),
      NOT_APPROVED,
    );
    await vi.waitFor(
      async () => {
        const applied = await inTenant((tx) => core.applyDueControlChanges(tx, tenantId));
        expect(applied.applied).toBe(1);
      },
      { timeout: 10_000, interval: 200 },
    );
    expect(await inTenant((tx) => core.governanceOf(tx, tenantId))).toMatchObject({
      proposalTtlSeconds: 7_200,
      looseningDelaySeconds: 1,
    });
  });
});
