/**
 * The governance settings (admin quorum, loosening delay, proposal lifetime) decide how hard every
 * other control is to loosen, so the database guards them too: the application's role writes them
 * only as the apply step of a governance control change the other admins approved and waited out.
 * Whoever holds the application's login cannot lower the delay or the quorum with one statement.
 */
import { createTestDatabase, makeControlChangeDue, type TestDatabase } from '@idem/testing/database';
import { newTenant, staffMembers } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { createOutboundEndpoint, insertOutboundEndpoint } from '../src/delivery/outbound-endpoints.ts';
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
    // The one-second delay passes: moved back on the database's clock rather than waited for.
    await makeControlChangeDue(t.db, proposal.proposalId);
    const applied = await inTenant((tx) => core.applyDueControlChanges(tx, tenantId));
    expect(applied.applied).toBe(1);
    expect(await inTenant((tx) => core.governanceOf(tx, tenantId))).toMatchObject({
      proposalTtlSeconds: 7_200,
      looseningDelaySeconds: 1,
    });
  });
});

/**
 * API keys and outbound endpoints: the application's role stores them inactive and makes them live
 * only as the apply step of an approved, due control change naming them (docs/GOVERNANCE.md, "Keys
 * and endpoints wait inactive"). Only the deployment's own tools (the tables' owner, a superuser:
 * the CLI) store them active. Whatever the application's code does, one admin's request cannot.
 */
describe('the database guards API keys and outbound endpoints', () => {
  const RESOLVE = async () => [{ address: '93.184.215.14', family: 4 as const }];
  const EGRESS = { allowPlainHttp: false, allowInternal: [], resolve: RESOLVE };
  const URL = 'https://hooks.partner.example/hook';
  const STORED_INACTIVE = /stored inactive/;

  it('I31-QUORUM the application role stores a key or an endpoint only inactive; the deployment tools store them active', async () => {
    // The staff path's own functions, asked for an active row under the application role.
    await refusedWith(
      inTenant((tx) => core.mintApiKey(tx, tenantId, { scopes: ['read'], createdBy: alice })),
      STORED_INACTIVE,
    );
    await refusedWith(
      inTenant((tx) => insertOutboundEndpoint(tx, tenantId, { url: URL, inactive: false })),
      STORED_INACTIVE,
    );
    // A statement of its own, naming the activation time: refused too, in any mode.
    const setup = await newTenant(t.db, 'Setup Mode');
    for (const tenant of [tenantId, setup]) {
      await refusedWith(
        withTenant(t.db, tenant, (tx) =>
          tx.execute(sql`insert into outbound_endpoints (tenant_id, endpoint_id, url, secret, activated_at)
                          values (${tenant}::uuid, gen_random_uuid(), ${URL}, 'whsec_x', now())`),
        ),
        STORED_INACTIVE,
      );
    }
    // Inactive, as the staff screens store them: accepted.
    const waiting = await inTenant(async (tx) => ({
      key: await core.mintApiKey(tx, tenantId, { scopes: ['read'], createdBy: alice, inactive: true }),
      endpoint: await insertOutboundEndpoint(tx, tenantId, { url: URL, inactive: true }),
    }));
    // The deployment's CLI (`apikey create`, `outbound-endpoint create`) runs as the connection's
    // own role, here the owner: its rows are active at once.
    const key = await core.createApiKey(t.db, tenantId, { scopes: ['read'], createdBy: 'cli:operator' });
    const endpoint = await createOutboundEndpoint(t.db, tenantId, { url: URL }, EGRESS);
    const activated = await inTenant(async (tx) => ({
      keys: rowsOf<{ key_id: string; active: boolean }>(
        await tx.execute(sql`select key_id, activated_at is not null as active from api_keys`),
      ),
      endpoints: rowsOf<{ endpoint_id: string; active: boolean }>(
        await tx.execute(sql`select endpoint_id, activated_at is not null as active from outbound_endpoints`),
      ),
    }));
    expect(activated.keys).toEqual(
      expect.arrayContaining([
        { key_id: waiting.key.keyId, active: false },
        { key_id: key.keyId, active: true },
      ]),
    );
    expect(activated.keys).toHaveLength(2);
    expect(activated.endpoints).toEqual(
      expect.arrayContaining([
        { endpoint_id: waiting.endpoint.endpointId, active: false },
        { endpoint_id: endpoint.endpointId, active: true },
      ]),
    );
    expect(activated.endpoints).toHaveLength(2);
  });

  it('I31-QUORUM the application role adds a scope to a key only as the apply step of an approved, due change with those scopes', async () => {
    const { keyId } = await core.createApiKey(t.db, tenantId, {
      scopes: ['read'],
      createdBy: 'cli:operator',
    });
    const widen = (scopes: string, widener: string | null) =>
      inTenant((tx) =>
        tx.execute(sql`update api_keys
                          set scopes = ${sql.raw(scopes)}::text[], widened_by = ${widener},
                              widened_at = case when ${widener}::text is null then null else clock_timestamp() end
                        where key_id = ${keyId}::uuid`),
      );
    const NO_CHANGE = /only by an approved, due control change/;
    // One admin's statement, naming itself as the widener: refused.
    await refusedWith(widen(`array['read','withdraw']`, alice), NO_CHANGE);
    const { proposal } = await inTenant((tx) =>
      core.proposeControlChange(tx, {
        tenantId,
        actor: alice,
        change: { control: 'api_key_scopes', keyId, scopes: ['read', 'webhooks'] },
      }),
    );
    await inTenant((tx) =>
      core.decideProposal(tx, {
        tenantId,
        proposalId: proposal.proposalId,
        staffId: bob,
        payloadHash: proposal.payloadHash,
        decision: 'approve',
      }),
    );
    // Approved: still refused before its effective time, and for a scope it does not name.
    await refusedWith(widen(`array['read','webhooks']`, alice), NO_CHANGE);
    // The one-second delay passes: moved back on the database's clock rather than waited for.
    await makeControlChangeDue(t.db, proposal.proposalId);
    await refusedWith(widen(`array['read','withdraw']`, alice), NO_CHANGE);
    await refusedWith(widen(`array['read','webhooks','withdraw']`, alice), NO_CHANGE);
    // Its own scopes still name their widener.
    await refusedWith(widen(`array['read','webhooks']`, null), /must record who added it/);
    const applied = await inTenant((tx) => core.applyDueControlChanges(tx, tenantId));
    expect(applied.applied).toBe(1);
    const [row] = await inTenant(async (tx) =>
      rowsOf<{ scopes: string[]; widened_by: string }>(
        await tx.execute(sql`select scopes, widened_by from api_keys where key_id = ${keyId}::uuid`),
      ),
    );
    expect(row).toEqual({ scopes: ['read', 'webhooks'], widened_by: alice });
    // Executed: the change is spent; a second widening needs a change of its own.
    await inTenant((tx) =>
      tx.execute(sql`update api_keys set scopes = array['read'] where key_id = ${keyId}::uuid`),
    );
    await refusedWith(widen(`array['read','webhooks']`, alice), NO_CHANGE);
  });

  it('I31-QUORUM a disabled outbound endpoint stays disabled', async () => {
    const { endpointId } = await createOutboundEndpoint(t.db, tenantId, { url: URL }, EGRESS);
    await inTenant((tx) => core.disableEndpoint(tx, tenantId, { direction: 'outbound', endpointId }));
    await refusedWith(
      inTenant((tx) =>
        tx.execute(
          sql`update outbound_endpoints set disabled_at = null where endpoint_id = ${endpointId}::uuid`,
        ),
      ),
      /stays disabled/,
    );
  });
});
