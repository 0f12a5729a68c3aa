import { randomUUID } from 'node:crypto';
import {
  createOutboundEndpoint,
  createStaffUser,
  fanOutNotification,
  leaseDueDeliveries,
  recordDeliveryAttempt,
  rowsOf,
  setTenantGovernance,
  withTenant,
} from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { approveAndApply } from './support/control-changes.ts';
import { createStaffOfRoles, LOCAL_RECEIVERS, startSilentServer } from './support/in-process.ts';
import { provisionTenant, type TenantFixture } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * Configuration that needed the CLI, through the staff API over real HTTP: API keys
 * (created, shown once, last use, revoked at once on this server), webhook endpoints (created,
 * secrets rotated with an overlap, disabled) and risk rules per asset with their history.
 * The server runs with a one-minute API key cache, so only cache invalidation can make a revoked
 * key fail at once.
 */
let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;
const { call, signIn } = staffHttp(() => base);

const session = (role: 'support' | 'operator' | 'admin' | 'admin2'): Promise<StaffSession> =>
  signIn({ tenantId: tenant.tenantId, email: `${role}@config.invalid`, password: PASSWORD });

interface KeyView {
  keyId: string;
  label: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

interface RuleView {
  assetCode: string;
  decimals: number;
  autoApproveMaxMinor: string;
  fourEyesMinMinor: string;
  velocityMaxPerHour: number;
}

interface ChangeView {
  toVersion: number;
  assetCode: string | null;
  actor: string;
  actorEmail: string | null;
  before: Record<string, string> | null;
  after: Record<string, string> | null;
}

const useKey = (apiKey: string) =>
  fetch(`${base}/v1/assets`, { headers: { authorization: `Bearer ${apiKey}` } });

async function postInbound(endpointId: string, secret: string, eventId: string): Promise<number> {
  const body = JSON.stringify({
    type: 'deposit.confirmed',
    timestamp: '2026-01-01T00:00:00Z',
    data: { reference: eventId, accountId: 'cust-7', asset: 'ETH', amountMinor: '100' },
  });
  const at = new Date();
  const response = await fetch(`${base}/webhooks/${endpointId}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': eventId,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign(eventId, at, body),
    },
    body,
  });
  await response.body?.cancel();
  return response.status;
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  tenant = await provisionTenant(database.db, { name: 'Configured' });
  await createStaffOfRoles(
    database.db,
    tenant.tenantId,
    ['support', 'operator', 'admin'],
    'config.invalid',
    await hashPassword(PASSWORD),
  );
  // A second admin, so a loosening can be approved by someone other than its proposer.
  const passwordHash = await hashPassword(PASSWORD);
  await provisionRiskPolicy(database.db, {
    tenantId: tenant.tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: '2000000000000000000',
    fourEyesMinMinor: '10000000000000000000',
    velocityMaxPerHour: 10,
    actor: 'provisioning',
  });
  await withTenant(database.db, tenant.tenantId, async (tx) => {
    await createStaffUser(tx, {
      tenantId: tenant.tenantId,
      email: 'admin2@config.invalid',
      passwordHash,
      role: 'admin',
    });
    // The deployment's starting ETH rule; the screen's changes below lower it (a tightening, applied at once).
  });
  ({ server, base } = await startSilentServer(database, {
    IDEM_API_KEY_CACHE_MS: '60000',
    // The test's destinations are on 127.0.0.1, admitted as a deployment admits an internal receiver.
    IDEM_WEBHOOK_ALLOW_INTERNAL: '127.0.0.1',
  }));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('I14-KEYS API keys from the staff screens', () => {
  it('I14-KEYS an admin creates a labelled key (shown once), its use is recorded, and a revoked key is refused over HTTP at once', async () => {
    const admin = await session('admin');
    const created = dataOf<{ keyId: string; apiKey: string; label: string; proposalId: string }>(
      await call('staffConfig.createApiKey', {
        mutation: true,
        session: admin,
        input: { label: 'payouts', scopes: ['read'] },
      }),
    );
    expect(created.apiKey).toMatch(/^idem_[0-9a-f]{32}_/);
    expect(created.label).toBe('payouts');
    // A new key is a loosening (I31-QUORUM): the other admin approves it; no delay in this test.
    await setTenantGovernance(database.db, { tenantId: tenant.tenantId, looseningDelaySeconds: 0 });
    try {
      await approveAndApply(database.db, tenant.tenantId, call, await session('admin2'), created.proposalId);
    } finally {
      await setTenantGovernance(database.db, { tenantId: tenant.tenantId, looseningDelaySeconds: 86_400 });
    }

    const listed = async () =>
      dataOf<KeyView[]>(await call('staffConfig.apiKeys', { session: admin })).find(
        (k) => k.keyId === created.keyId,
      );
    const before = await listed();
    expect(before).toMatchObject({ label: 'payouts', lastUsedAt: null, revokedAt: null });
    // The list shows a prefix to tell keys apart, never the key.
    expect(created.apiKey.startsWith(before?.prefix ?? 'none')).toBe(true);
    expect(before?.prefix.length).toBeLessThan(created.apiKey.length - 30);
    expect(JSON.stringify(await call('staffConfig.apiKeys', { session: admin }))).not.toContain(
      created.apiKey,
    );

    // Used twice: the first use is recorded; the cache now holds the key for a minute.
    expect((await useKey(created.apiKey)).status).toBe(200);
    expect((await useKey(created.apiKey)).status).toBe(200);
    const used = await listed();
    expect(used?.lastUsedAt).not.toBeNull();

    const revoked = await call('staffConfig.revokeApiKey', {
      mutation: true,
      session: admin,
      input: { keyId: created.keyId },
    });
    expect(revoked.status).toBe(200);
    const refused = await useKey(created.apiKey);
    expect(refused.status).toBe(401);
    expect((await listed())?.revokedAt).not.toBeNull();
    // The tenant's other key still works.
    expect((await useKey(tenant.apiKey)).status).toBe(200);
  });

  it('I14-KEYS keys are an admin matter: an operator reads the list, support reads nothing, neither creates or revokes', async () => {
    const operator = await session('operator');
    const support = await session('support');
    expect((await call('staffConfig.apiKeys', { session: operator })).status).toBe(200);
    const hidden = await call('staffConfig.apiKeys', { session: support });
    expect(hidden.body.error?.data.code).toBe('FORBIDDEN');
    const refused = await call('staffConfig.createApiKey', {
      mutation: true,
      session: operator,
      input: { label: 'sneaky', scopes: ['read'] },
    });
    expect(refused.body.error?.data.code).toBe('FORBIDDEN');
    const revoke = await call('staffConfig.revokeApiKey', {
      mutation: true,
      session: operator,
      input: { keyId: tenant.keyId },
    });
    expect(revoke.body.error?.data.code).toBe('FORBIDDEN');
    expect((await useKey(tenant.apiKey)).status).toBe(200);
  });
});

describe('I14-ENDPOINTS webhook endpoints from the staff screens', () => {
  it('I14-ENDPOINTS an inbound secret rotated with an overlap: both verify during it, the old one is refused after it', async () => {
    const admin = await session('admin');
    const created = dataOf<{ endpointId: string; secret: string }>(
      await call('staffConfig.createInboundEndpoint', {
        mutation: true,
        session: admin,
        input: { source: 'custodian' },
      }),
    );
    expect(await postInbound(created.endpointId, created.secret, 'evt-a')).toBe(200);

    const rotated = dataOf<{ secret: string; previousSecretUntil: string | null }>(
      await call('staffConfig.rotateEndpointSecret', {
        mutation: true,
        session: admin,
        input: { direction: 'inbound', endpointId: created.endpointId, overlapMinutes: 60 },
      }),
    );
    expect(rotated.secret).not.toBe(created.secret);
    expect(rotated.previousSecretUntil).not.toBeNull();
    expect(await postInbound(created.endpointId, created.secret, 'evt-b')).toBe(200);
    expect(await postInbound(created.endpointId, rotated.secret, 'evt-c')).toBe(200);

    // A rotation without overlap ends the previous secret's validity at once.
    const again = dataOf<{ secret: string }>(
      await call('staffConfig.rotateEndpointSecret', {
        mutation: true,
        session: admin,
        input: { direction: 'inbound', endpointId: created.endpointId, overlapMinutes: 0 },
      }),
    );
    expect(await postInbound(created.endpointId, rotated.secret, 'evt-d')).toBe(401);
    expect(await postInbound(created.endpointId, created.secret, 'evt-e')).toBe(401);
    expect(await postInbound(created.endpointId, again.secret, 'evt-f')).toBe(200);

    const listed = dataOf<{ inbound: { endpointId: string; source: string; secret?: string }[] }>(
      await call('staffConfig.endpoints', { session: admin }),
    );
    const row = listed.inbound.find((e) => e.endpointId === created.endpointId);
    expect(row?.source).toBe('custodian');
    // Secrets are shown once, at creation and rotation; never in the list.
    expect(JSON.stringify(listed)).not.toContain(again.secret);

    const disabled = await call('staffConfig.disableEndpoint', {
      mutation: true,
      session: admin,
      input: { direction: 'inbound', endpointId: created.endpointId },
    });
    expect(disabled.status).toBe(200);
    expect(await postInbound(created.endpointId, again.secret, 'evt-g')).toBe(401);
  });

  it('I14-ENDPOINTS outbound destinations: created, rotated and disabled by an admin; an operator only reads; a bad URL or overlap is VALIDATION', async () => {
    const admin = await session('admin');
    const operator = await session('operator');
    const created = dataOf<{ endpointId: string; url: string; secret: string }>(
      await call('staffConfig.createOutboundEndpoint', {
        mutation: true,
        session: admin,
        input: { url: 'http://127.0.0.1:9/hooks' },
      }),
    );
    expect(created.secret).toMatch(/^whsec_/);
    const badUrl = await call('staffConfig.createOutboundEndpoint', {
      mutation: true,
      session: admin,
      input: { url: 'ftp://example.invalid/x' },
    });
    expect(badUrl.body.error?.data.code).toBe('VALIDATION');
    const badOverlap = await call('staffConfig.rotateEndpointSecret', {
      mutation: true,
      session: admin,
      input: { direction: 'outbound', endpointId: created.endpointId, overlapMinutes: -5 },
    });
    expect(badOverlap.body.error?.data.code).toBe('VALIDATION');
    const byOperator = await call('staffConfig.rotateEndpointSecret', {
      mutation: true,
      session: operator,
      input: { direction: 'outbound', endpointId: created.endpointId, overlapMinutes: 10 },
    });
    expect(byOperator.body.error?.data.code).toBe('FORBIDDEN');

    const rotated = dataOf<{ secret: string; previousSecretUntil: string | null }>(
      await call('staffConfig.rotateEndpointSecret', {
        mutation: true,
        session: admin,
        input: { direction: 'outbound', endpointId: created.endpointId, overlapMinutes: 30 },
      }),
    );
    expect(rotated.secret).not.toBe(created.secret);
    const listed = dataOf<{
      outbound: {
        endpointId: string;
        url: string;
        previousSecretUntil: string | null;
        disabledAt: string | null;
      }[];
    }>(await call('staffConfig.endpoints', { session: operator }));
    const row = listed.outbound.find((e) => e.endpointId === created.endpointId);
    expect(row).toMatchObject({ url: 'http://127.0.0.1:9/hooks', disabledAt: null });
    expect(row?.previousSecretUntil).toBe(rotated.previousSecretUntil);

    await call('staffConfig.disableEndpoint', {
      mutation: true,
      session: admin,
      input: { direction: 'outbound', endpointId: created.endpointId },
    });
    const after = dataOf<{ outbound: { endpointId: string; disabledAt: string | null }[] }>(
      await call('staffConfig.endpoints', { session: admin }),
    );
    expect(after.outbound.find((e) => e.endpointId === created.endpointId)?.disabledAt).not.toBeNull();
  });
});

describe('I14-KEYS configuration changes are audited', () => {
  it('I14-KEYS a created key, a rotation and a refused rule change are in the audit log, with who and what, never a secret', async () => {
    const admin = await session('admin');
    const created = dataOf<{ keyId: string; apiKey: string }>(
      await call('staffConfig.createApiKey', {
        mutation: true,
        session: admin,
        input: { label: 'audited', scopes: ['read'] },
      }),
    );
    const refused = await call('staffConfig.setRiskRule', {
      mutation: true,
      session: admin,
      input: { assetCode: 'ETH', autoApproveMaxMinor: '9', fourEyesMinMinor: '3' },
    });
    expect(refused.body.error?.data.code).toBe('VALIDATION');
    const entries = dataOf<{ items: { actor: string; action: string; outcome: string; details: unknown }[] }>(
      await call('staffAudit.list', { session: admin, input: {} }),
    ).items;
    expect(entries).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          action: 'staffConfig.createApiKey',
          outcome: 'ok',
          details: { label: 'audited', scopes: ['read'] },
        }),
        expect.objectContaining({ action: 'staffConfig.setRiskRule', outcome: 'VALIDATION' }),
      ]),
    );
    expect(JSON.stringify(entries)).not.toContain(created.apiKey);
  });
});

describe('I14-ENDPOINTS redelivery by hand', () => {
  type RedeliveryView = {
    status: string;
    attempts: number;
    nextAttemptAt: string | null;
    manualRedeliveries: number;
  };

  /** One pending delivery that failed three times, to an endpoint nobody answers on. */
  async function failedDelivery(reference: string): Promise<{ workId: string; endpointId: string }> {
    const { endpointId } = await createOutboundEndpoint(
      database.db,
      tenant.tenantId,
      { url: 'http://127.0.0.1:9/hook' },
      LOCAL_RECEIVERS,
    );
    const workId = randomUUID();
    await withTenant(database.db, tenant.tenantId, async (tx) => {
      await fanOutNotification(tx, {
        tenantId: tenant.tenantId,
        workId,
        operationId: null,
        endpointIds: [endpointId],
        body: {
          type: 'operation.state_changed',
          timestamp: new Date().toISOString(),
          data: {
            operationId: randomUUID(),
            kind: 'withdrawal',
            reference,
            accountId: 'cust-1',
            asset: 'ETH',
            amountMinor: '1',
            from: 'APPROVED',
            to: 'SIGNING',
            version: 3,
            owner: null,
            txHash: null,
            custodianTransferId: null,
            custodianTxHash: null,
          },
        },
      });
      await tx.execute(
        sql`update webhook_deliveries set attempts = 3, last_response_status = 503 where work_id = ${workId}`,
      );
    });
    return { workId, endpointId };
  }

  const retryByHand = async (delivery: { workId: string; endpointId: string }) =>
    dataOf<RedeliveryView>(
      await call('staffConsole.redeliver', {
        mutation: true,
        session: await session('operator'),
        input: delivery,
      }),
    );

  it('I14-ENDPOINTS a failed delivery waiting for its next retry is retried now by hand, keeping its attempt count', async () => {
    const delivery = await failedDelivery('wd-retry');
    // The next attempt is scheduled an hour from now.
    await database.db.execute(
      sql`update webhook_deliveries set available_at = now() + interval '1 hour' where work_id = ${delivery.workId}`,
    );
    const answer = await retryByHand(delivery);
    expect(answer).toMatchObject({ status: 'pending', attempts: 3, manualRedeliveries: 1 });
    expect(Date.parse(answer.nextAttemptAt ?? '')).toBeLessThanOrEqual(Date.now() + 1_000);
  });

  it('I14-ENDPOINTS a retry by hand of a delivery already due (a sender released it uncounted) is recorded and keeps it due', async () => {
    const delivery = await failedDelivery('wd-retry-due');
    await database.db.execute(
      sql`update webhook_deliveries set available_at = now() - interval '1 second' where work_id = ${delivery.workId}`,
    );
    const answer = await retryByHand(delivery);
    expect(answer).toMatchObject({ status: 'pending', attempts: 3, manualRedeliveries: 1 });
    expect(Date.parse(answer.nextAttemptAt ?? '')).toBeLessThanOrEqual(Date.now() + 1_000);
  });

  it('I14-ENDPOINTS a retry by hand during an attempt is recorded; when that attempt fails the next one is due at once instead of after the backoff', async () => {
    const delivery = await failedDelivery('wd-retry-leased');
    // A sender leases it, with whatever else of this tenant is due.
    const leased = await leaseDueDeliveries(database.db, tenant.tenantId, {
      workerId: 'sender-1',
      limit: 100,
      leaseMs: 60_000,
    });
    const mine = leased.find((d) => d.workId === delivery.workId);
    expect(mine).toBeDefined();
    if (!mine) return;
    const answer = await retryByHand(delivery);
    expect(answer).toMatchObject({ status: 'pending', attempts: 3, manualRedeliveries: 1 });
    // The receiver was still down when the sender's request left: the attempt fails.
    await recordDeliveryAttempt(database.db, tenant.tenantId, mine, 'sender-1', {
      delivered: false,
    });
    const [row] = rowsOf<{ attempts: number; due: boolean }>(
      await database.db.execute(
        sql`select attempts, available_at <= now() as due from webhook_deliveries where work_id = ${delivery.workId}`,
      ),
    );
    expect(row).toEqual({ attempts: 4, due: true });
    // That retry was used once: the next failure backs off as usual.
    const again = await leaseDueDeliveries(database.db, tenant.tenantId, {
      workerId: 'sender-1',
      limit: 100,
      leaseMs: 60_000,
    });
    const next = again.find((d) => d.workId === delivery.workId);
    expect(next).toBeDefined();
    if (!next) return;
    await recordDeliveryAttempt(database.db, tenant.tenantId, next, 'sender-1', {
      delivered: false,
    });
    const [after] = rowsOf<{ attempts: number; backing_off: boolean }>(
      await database.db.execute(
        sql`select attempts, available_at > now() + interval '10 seconds' as backing_off from webhook_deliveries where work_id = ${delivery.workId}`,
      ),
    );
    expect(after).toEqual({ attempts: 5, backing_off: true });
  });
});

describe('I14-RISK risk rules per asset with their history', () => {
  it('I14-RISK an admin changes a rule; the history shows the change and who made it; invalid rules are VALIDATION and change nothing', async () => {
    const admin = await session('admin');
    const support = await session('support');
    const set = (input: Record<string, unknown>, who = admin) =>
      call('staffConfig.setRiskRule', { mutation: true, session: who, input });
    const ok = await set({
      assetCode: 'ETH',
      autoApproveMaxMinor: '1000000000000000000',
      fourEyesMinMinor: '5000000000000000000',
      velocityMaxPerHour: 7,
    });
    expect(ok.status).toBe(200);

    const rules = dataOf<{ rules: RuleView[] }>(await call('staffConfig.riskRules', { session: support }));
    expect(rules.rules.find((r) => r.assetCode === 'ETH')).toMatchObject({
      decimals: 18,
      autoApproveMaxMinor: '1000000000000000000',
      fourEyesMinMinor: '5000000000000000000',
      velocityMaxPerHour: 7,
    });
    const history = async () =>
      dataOf<ChangeView[]>(await call('staffConfig.riskHistory', { session: support }));
    const changes = await history();
    const last = changes.at(-1);
    expect(last?.assetCode).toBe('ETH');
    expect(last?.actorEmail).toBe('admin@config.invalid');
    expect(last?.after).toMatchObject({ auto_approve_max_minor: '1000000000000000000' });

    for (const invalid of [
      { autoApproveMaxMinor: '-1', fourEyesMinMinor: '5' },
      { autoApproveMaxMinor: '1.5', fourEyesMinMinor: '5' },
      { autoApproveMaxMinor: '10', fourEyesMinMinor: '5' },
      { autoApproveMaxMinor: '5', fourEyesMinMinor: '5' },
      { autoApproveMaxMinor: '1', fourEyesMinMinor: '5', velocityMaxPerHour: -1 },
    ]) {
      const refused = await set({ assetCode: 'ETH', velocityMaxPerHour: 7, ...invalid });
      expect(refused.body.error?.data.code, JSON.stringify(invalid)).toBe('VALIDATION');
    }
    const unknownAsset = await set({ assetCode: 'NOPE', autoApproveMaxMinor: '1', fourEyesMinMinor: '5' });
    expect(unknownAsset.body.error?.data.code).toBe('VALIDATION');
    const bySupport = await set(
      { assetCode: 'ETH', autoApproveMaxMinor: '1', fourEyesMinMinor: '5' },
      support,
    );
    expect(bySupport.body.error?.data.code).toBe('FORBIDDEN');
    expect(await history()).toEqual(changes);
  });
});

describe('I31-QUORUM loosening a risk rule from the screens', () => {
  it('I31-QUORUM an admin raising the auto-approve limit to 1e9 alone changes nothing: it is proposed, another admin approves, it waits out the delay', async () => {
    const admin = await session('admin');
    const other = await session('admin2');
    const before = dataOf<{ rules: RuleView[] }>(await call('staffConfig.riskRules', { session: admin }));
    const raised = await call('staffConfig.setRiskRule', {
      mutation: true,
      session: admin,
      input: {
        assetCode: 'ETH',
        autoApproveMaxMinor: `1${'0'.repeat(27)}`,
        fourEyesMinMinor: `2${'0'.repeat(27)}`,
        velocityMaxPerHour: 7,
      },
    });
    const outcome = dataOf<{
      outcome: string;
      proposalId: string;
      approvalsRequired: number;
      changed: boolean;
    }>(raised);
    expect(outcome).toMatchObject({ outcome: 'PROPOSED', approvalsRequired: 1, changed: false });
    const after = dataOf<{ rules: RuleView[] }>(await call('staffConfig.riskRules', { session: admin }));
    expect(after.rules).toEqual(before.rules);

    type Proposal = { proposalId: string; payloadHash: string; state: string; effectiveAt: string | null };
    const proposal = dataOf<Proposal>(
      await call('staffProposals.get', { session: other, input: { proposalId: outcome.proposalId } }),
    );
    const own = await call('staffProposals.decide', {
      mutation: true,
      session: admin,
      input: { proposalId: proposal.proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
    });
    expect(own.body.error?.data.code).toBe('FORBIDDEN');
    const decided = dataOf<{ proposal: Proposal }>(
      await call('staffProposals.decide', {
        mutation: true,
        session: other,
        input: { proposalId: proposal.proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
      }),
    );
    expect(decided.proposal.state).toBe('APPROVED');
    const effective = Date.parse(decided.proposal.effectiveAt ?? '');
    expect(effective - Date.now()).toBeGreaterThan(23 * 60 * 60_000);
    const still = dataOf<{ rules: RuleView[] }>(await call('staffConfig.riskRules', { session: admin }));
    expect(still.rules).toEqual(before.rules);
    const told = dataOf<{ topic: string; proposalId: string | null }[]>(
      await call('staffOverview.notifications', { session: other }),
    );
    expect(
      told
        .filter((n) => n.proposalId === proposal.proposalId)
        .map((n) => n.topic)
        .sort(),
    ).toEqual(['control_change_approved', 'control_change_proposed']);
  });
});
