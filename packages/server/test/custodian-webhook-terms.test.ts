import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import {
  createWebhookEndpoint,
  createWithdrawal,
  getOperation,
  listBreaks,
  type Operation,
  withTenant,
} from '@idem/core';
import { createCustodianAdapter, generateWebhookSecret } from '@idem/rails';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { createWorker, RailRegistry } from '@idem/workers';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { startSilentServer } from './support/in-process.ts';
import { provisionTenant, uniqueId } from './support/provision.ts';

/**
 * Tried from outside: a custodian's signed status webhook reaches the server's real HTTP
 * intake and the worker applies it. A "completed" naming another transfer id than the one the
 * custodian acknowledged, or another destination, must not settle the withdrawal: it stays as it
 * is and a genuine_variance break says why. An event type we do not know raises an alert.
 */
const BTC_DESTINATION = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
const ELSEWHERE = 'bc1qxy2kgdygjrsqtzq2n0yrf2493p83kkfjhx0wlh';

let database: TestDatabase;
let simulator: SimulatorProcess;
let server: RunningServer;
let base: string;
let tenantId: string;
let endpoint: { endpointId: string; secret: string };
const serverLog: Record<string, unknown>[] = [];

const worker = () =>
  createWorker({
    db: database.db,
    rails: new RailRegistry({ custodian: createCustodianAdapter({ baseUrl: simulator.url }) }),
    log: pino({ level: 'silent' }),
    workerId: 'terms-worker',
    leaseMs: 5_000,
  });
const operation = (operationId: string) =>
  withTenant(database.db, tenantId, (tx) => getOperation(tx, tenantId, operationId));

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 6 });
  ({ tenantId } = await provisionTenant(database.db, {
    name: 'Terms Exchange',
    fund: [{ accountId: 'cust-7', asset: 'BTC', amountMinor: '100000000' }],
  }));
  await provisionRiskPolicy(database.db, {
    tenantId,
    assetCode: 'BTC',
    autoApproveMaxMinor: '10000000',
    fourEyesMinMinor: '50000000',
    actor: 'test:setup',
  });
  endpoint = await createWebhookEndpoint(database.db, tenantId, { source: 'custodian' });
  // The custodian accepts and never settles on its own: only the webhooks below speak for it.
  simulator = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
  await simulator.control({ settlement: { outcome: 'hold', afterMs: 0 } });
  const logDestination = new Writable({
    write: (chunk, _encoding, done) => {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) serverLog.push(JSON.parse(line));
      done();
    },
  });
  ({ server, base } = await startSilentServer(
    database,
    { LOG_LEVEL: 'info', IDEM_WORKER_IN_PROCESS: 'false' },
    { logDestination },
  ));
});
afterAll(async () => {
  await server?.close();
  await simulator?.stop();
  await database?.dispose();
});

/** A BTC withdrawal the custodian acknowledged: BROADCAST, with the custodian's transfer id stored. */
async function acknowledged(amountMinor: string): Promise<Operation> {
  const created = await withTenant(database.db, tenantId, (tx) =>
    createWithdrawal(tx, {
      tenantId,
      request: {
        withdrawalId: randomUUID(),
        accountId: 'cust-7',
        asset: 'BTC',
        destination: BTC_DESTINATION,
        amountMinor,
      },
      idempotencyKey: `withdrawal-${randomUUID()}`,
    }),
  );
  await worker().runOnce();
  const op = await operation(created.operation.operationId);
  expect(op.state).toBe('BROADCAST');
  expect(op.providerRef).toMatch(/^trf_/);
  return op;
}

/** Posts a body signed with the endpoint's secret, as the custodian would. */
async function deliver(body: unknown): Promise<{ status: number; outcome: string }> {
  const eventId = uniqueId('msg');
  const text = JSON.stringify(body);
  const at = new Date();
  const response = await fetch(`${base}/webhooks/${endpoint.endpointId}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': eventId,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(endpoint.secret).sign(eventId, at, text),
    },
    body: text,
  });
  return { status: response.status, outcome: ((await response.json()) as { outcome: string }).outcome };
}

function completed(op: Operation, overrides: { id?: string; destination?: string }) {
  return {
    type: 'transfer.completed',
    occurredAt: new Date().toISOString(),
    data: {
      id: overrides.id ?? op.providerRef,
      externalReference: op.operationId,
      asset: op.assetCode,
      amountMinor: op.amountMinor,
      destination: overrides.destination ?? op.destination,
      status: 'completed',
      txHash: `0x${'ab'.repeat(32)}`,
    },
  };
}

async function openBreakOf(op: Operation) {
  const open = await withTenant(database.db, tenantId, (tx) => listBreaks(tx, { tenantId, status: 'open' }));
  return open.find((b) => b.subject === `operation:${op.operationId}`);
}

describe('I13-BRK custodian terms over the real webhook intake', () => {
  it('I13-BRK C16 C21 a signed "completed" naming another transfer id does not settle the withdrawal: a variance break', async () => {
    const op = await acknowledged('21000');
    expect(await deliver(completed(op, { id: `trf_${randomUUID()}` }))).toEqual({
      status: 200,
      outcome: 'ACCEPTED',
    });
    await worker().runOnce();
    expect((await operation(op.operationId)).state).toBe('BROADCAST');
    const variance = await openBreakOf(op);
    expect(variance).toMatchObject({ breakClass: 'genuine_variance', owner: 'finance-controller' });
    expect(variance?.details).toMatchObject({ differs: ['providerId'], expectedProviderId: op.providerRef });
  });

  it('I13-BRK C16 C21 a custodian completion to a different address is a break, not a settlement', async () => {
    const op = await acknowledged('22000');
    expect((await deliver(completed(op, { destination: ELSEWHERE }))).outcome).toBe('ACCEPTED');
    await worker().runOnce();
    expect((await operation(op.operationId)).state).toBe('BROADCAST');
    expect((await openBreakOf(op))?.details).toMatchObject({ differs: ['destination'] });
    // Once the custodian completes it, the same completion with the approved terms settles it.
    await simulator.control({ settleHeld: { externalReference: op.operationId, outcome: 'complete' } });
    expect((await deliver(completed(op, {}))).outcome).toBe('ACCEPTED');
    await worker().runOnce();
    expect((await operation(op.operationId)).state).toBe('CONFIRMED');
  });

  it('I13-BRK C19 an event type we do not know is stored UNHANDLED and raises an alert', async () => {
    serverLog.length = 0;
    expect(await deliver({ type: 'transfer.reversed', data: { id: 'trf_x' } })).toEqual({
      status: 200,
      outcome: 'UNHANDLED',
    });
    const alert = serverLog.find((line) => line.alert === 'webhook_unhandled');
    expect(alert).toMatchObject({ tenantId, eventType: 'transfer.reversed', level: 50 });
  });
});
