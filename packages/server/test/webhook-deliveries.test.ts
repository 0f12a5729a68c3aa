import { randomUUID } from 'node:crypto';
import { createOutboundEndpoint, fanOutNotification, withTenant } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { createStaffOfRoles, LOCAL_RECEIVERS, startSilentServer } from './support/in-process.ts';
import { provisionTenant, type TenantFixture } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * The outbound delivery log through the staff API over real HTTP: staff read it, an
 * operator redelivers a dead-lettered delivery by hand, nobody sees another tenant's log.
 */
let database: TestDatabase;
let server: RunningServer;
let base: string;
let ours: TenantFixture;
let theirs: TenantFixture;
const { call, signIn } = staffHttp(() => base);

async function deadDelivery(tenantId: string): Promise<{ workId: string; endpointId: string }> {
  const { endpointId } = await createOutboundEndpoint(
    database.db,
    tenantId,
    { url: 'http://127.0.0.1:9/hook' },
    LOCAL_RECEIVERS,
  );
  const workId = randomUUID();
  await withTenant(database.db, tenantId, async (tx) => {
    await fanOutNotification(tx, {
      tenantId,
      workId,
      operationId: null,
      endpointIds: [endpointId],
      body: {
        type: 'operation.state_changed',
        timestamp: new Date().toISOString(),
        data: {
          operationId: randomUUID(),
          kind: 'withdrawal',
          reference: 'wd-1',
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
      sql`update webhook_deliveries set status = 'dead', attempts = 8, last_response_status = 503, last_error = 'HTTP 503' where work_id = ${workId}`,
    );
  });
  return { workId, endpointId };
}

async function session(tenantId: string, role: 'support' | 'operator'): Promise<StaffSession> {
  return signIn({ tenantId, email: `${role}@deliveries.invalid`, password: PASSWORD });
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  const passwordHash = await hashPassword(PASSWORD);
  ours = await provisionTenant(database.db, { name: 'Deliveries' });
  theirs = await provisionTenant(database.db, { name: 'Other' });
  for (const tenant of [ours, theirs]) {
    await createStaffOfRoles(
      database.db,
      tenant.tenantId,
      ['support', 'operator'],
      'deliveries.invalid',
      passwordHash,
    );
  }
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('I14-DLV the delivery log in the staff API', () => {
  it('I14-DLV staff read the log with the last outcome; an operator redelivers a dead delivery, support may not', async () => {
    const dead = await deadDelivery(ours.tenantId);
    const support = await session(ours.tenantId, 'support');
    const log = await call('staffConsole.deliveries', { session: support, input: { status: 'dead' } });
    expect(log.status).toBe(200);
    const items = dataOf<{ items: { workId: string; lastResponseStatus: number | null }[] }>(log).items;
    // I31-EGRESS: a row holding a receiver's status and reason (as written before failures were
    // recorded generically) is shown as the one generic failure.
    expect(items.find((d) => d.workId === dead.workId)).toMatchObject({
      lastResponseStatus: null,
      lastError: 'delivery failed',
      status: 'dead',
    });

    const refused = await call('staffConsole.redeliver', { mutation: true, session: support, input: dead });
    expect(refused.body.error?.data.code).toBe('FORBIDDEN');

    const operator = await session(ours.tenantId, 'operator');
    const requeued = await call('staffConsole.redeliver', { mutation: true, session: operator, input: dead });
    expect(requeued.status).toBe(200);
    expect(requeued.body.result?.data).toMatchObject({
      status: 'pending',
      attempts: 0,
      manualRedeliveries: 1,
    });
  });

  it('I14-DLV another tenant neither sees nor redelivers our deliveries; a bad cursor is a VALIDATION error', async () => {
    const dead = await deadDelivery(ours.tenantId);
    const other = await session(theirs.tenantId, 'operator');
    const log = await call('staffConsole.deliveries', { session: other, input: {} });
    const items = dataOf<{ items: { workId: string }[] }>(log).items;
    expect(items.map((d) => d.workId)).not.toContain(dead.workId);
    const attempt = await call('staffConsole.redeliver', { mutation: true, session: other, input: dead });
    expect(attempt.body.error?.data.code).toBe('NOT_FOUND');
    const badCursor = await call('staffConsole.deliveries', {
      session: other,
      input: { cursor: 'nonsense' },
    });
    expect(badCursor.body.error?.data.code).toBe('VALIDATION');
  });
});
