import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createOutboundEndpoint,
  listDeliveries,
  redeliver,
  rotateEndpointSecret,
  rowsOf,
  withTenant,
} from '@idem/core';
import { sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Environment, ETH, LOCAL_RECEIVERS, startEnvironment } from './environment.ts';

/**
 * Outbound delivery as a receiver sees it. Each receiver verifies with the standardwebhooks library
 * (five-minute timestamp tolerance) and answers as its test tells it to.
 */
interface Receiver {
  url: string;
  secret: string;
  endpointId: string;
  received: { id: string; timestamp: number; data: { operationId: string; to: string } }[];
  rejected: string[];
  /** Answers this status instead of 204 while set. */
  failWith: number | null;
  /** Holds each answer until this resolves (a slow endpoint). */
  holdUntil: (() => Promise<void>) | null;
  close(): Promise<void>;
}

let env: Environment;
const receivers: Receiver[] = [];

async function receiver(): Promise<Receiver> {
  const state: Receiver = {
    url: '',
    secret: '',
    endpointId: '',
    received: [],
    rejected: [],
    failWith: null,
    holdUntil: null,
    close: async () => {},
  };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', async () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      try {
        new Webhook(state.secret).verify(raw, request.headers as Record<string, string>);
      } catch (error) {
        state.rejected.push((error as Error).message);
        response.writeHead(401).end();
        return;
      }
      if (state.holdUntil) await state.holdUntil();
      if (state.failWith !== null) {
        response.writeHead(state.failWith).end();
        return;
      }
      const body = JSON.parse(raw) as { data: { operationId: string; to: string } };
      state.received.push({
        id: String(request.headers['webhook-id']),
        timestamp: Number(request.headers['webhook-timestamp']),
        data: body.data,
      });
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/idem`;
  state.close = () => new Promise((resolve) => server.close(() => resolve()));
  const endpoint = await createOutboundEndpoint(env.t.db, env.tenantId, { url: state.url }, LOCAL_RECEIVERS);
  state.secret = endpoint.secret;
  state.endpointId = endpoint.endpointId;
  receivers.push(state);
  return state;
}

/** Makes every retry due now instead of after its backoff. */
async function retriesDueNow(): Promise<void> {
  await env.t.db.execute(sql`update work_items set available_at = now() where status = 'pending'`);
  await env.t.db.execute(sql`update webhook_deliveries set available_at = now() where status = 'pending'`);
}

/** What one receiver got for one operation, in order of arrival. */
function statesFor(r: Receiver, operationId: string): string[] {
  return r.received.filter((x) => x.data.operationId === operationId).map((x) => x.data.to);
}

beforeAll(async () => {
  env = await startEnvironment();
});
afterEach(async () => {
  // Each test registers its own endpoints; retire them so the next test starts clean.
  await env.t.db.execute(sql`update outbound_endpoints set disabled_at = now() where disabled_at is null`);
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await env.close();
});

describe('I14-DLV outbound webhook delivery', () => {
  it('I14-DLV each attempt carries its own timestamp: after an outage longer than the tolerance the queued notification is accepted', async () => {
    const r = await receiver();
    r.failWith = 503;
    const op = await env.withdraw(ETH / 1000n);
    const worker = env.worker();
    await worker.runOnce(); // the receiver is down: every notification fails
    expect(statesFor(r, op.operationId)).toEqual([]);
    // Simulated outage: six minutes pass before the receiver is back (tolerance is five).
    await env.t.db.execute(sql`update work_items set created_at = created_at - interval '6 minutes'`);
    r.failWith = null;
    await retriesDueNow();
    await worker.runOnce();
    await retriesDueNow();
    await worker.runOnce();
    expect(r.rejected).toEqual([]);
    expect(statesFor(r, op.operationId)).toContain('REQUESTED');
    const now = Math.floor(Date.now() / 1000);
    for (const delivery of r.received) expect(now - delivery.timestamp).toBeLessThan(60);
  });

  it('I14-DLV a failing endpoint causes no redelivery to a healthy one', async () => {
    const healthy = await receiver();
    const failing = await receiver();
    failing.failWith = 503;
    const op = await env.withdraw(ETH / 999n);
    const worker = env.worker();
    for (let pass = 0; pass < 4; pass += 1) {
      await worker.runOnce();
      await retriesDueNow();
    }
    const got = statesFor(healthy, op.operationId);
    expect(got).toContain('REQUESTED');
    expect(new Set(got).size).toBe(got.length);
    const ids = healthy.received.map((x) => x.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(statesFor(failing, op.operationId)).toEqual([]);
  });

  it('I14-DLV a slow endpoint does not hold back the healthy ones', async () => {
    const slow = await receiver();
    const healthy = await receiver();
    let healthyBeforeSlowAnswered: boolean | null = null;
    // The slow endpoint answers its first delivery only once the healthy one has received
    // something, or after 4 s (under the 5 s delivery timeout); a sequential sender makes the
    // healthy one wait behind it.
    slow.holdUntil = async () => {
      if (healthyBeforeSlowAnswered !== null) return;
      await vi
        .waitFor(
          () => {
            if (healthy.received.length === 0)
              throw new Error('the healthy endpoint has received nothing yet');
          },
          { timeout: 4_000, interval: 50 },
        )
        .catch(() => {}); // after 4 s the slow endpoint answers anyway: the assertion below tells
      healthyBeforeSlowAnswered = healthy.received.length > 0;
    };
    const op = await env.withdraw(ETH / 998n);
    await env.worker().runOnce();
    expect(statesFor(healthy, op.operationId)).toContain('REQUESTED');
    expect(healthyBeforeSlowAnswered).toBe(true);
  });

  it('I14-DLV C15 a dead-lettered delivery is listed with its last response and can be redelivered by hand, once', async () => {
    const r = await receiver();
    r.failWith = 500;
    const op = await env.withdraw(ETH / 997n);
    await env.worker().runOnce();
    await env.t.db.execute(
      sql`update webhook_deliveries set attempts = 7, available_at = now() where endpoint_id = ${r.endpointId} and status = 'pending'`,
    );
    await env.worker().runOnce();
    const { items: dead } = await withTenant(env.t.db, env.tenantId, (tx) =>
      listDeliveries(tx, env.tenantId, { status: 'dead', endpointId: r.endpointId }),
    );
    const requested = dead.find((d) => d.operationId === op.operationId && d.event.to === 'REQUESTED');
    // Staff read the generic failure (I31-EGRESS); the receiver's 500 is in the alert's log line.
    expect(requested).toMatchObject({
      attempts: 8,
      lastResponseStatus: null,
      lastError: 'delivery failed',
      status: 'dead',
    });
    expect(env.logLines.some((line) => line.includes('dead-lettered') && line.includes('HTTP 500'))).toBe(
      true,
    );

    r.failWith = null;
    if (!requested) throw new Error('no dead delivery');
    await withTenant(env.t.db, env.tenantId, (tx) =>
      redeliver(tx, env.tenantId, { workId: requested.workId, endpointId: r.endpointId }),
    );
    await env.worker().runOnce();
    await env.worker().runOnce();
    expect(r.received.filter((x) => x.id === requested.workId)).toHaveLength(1);
    const after = rowsOf<{ status: string }>(
      await env.t.db.execute(
        sql`select status from webhook_deliveries where work_id = ${requested.workId} and endpoint_id = ${r.endpointId}`,
      ),
    );
    expect(after).toEqual([{ status: 'done' }]);
  });
});

describe('I14-ENDPOINTS outbound secret rotation', () => {
  it('I14-ENDPOINTS during the overlap every attempt is signed with both secrets, so receivers holding either verify; after it only the new one signs', async () => {
    const r = await receiver();
    const rotate = (overlapMinutes: number) =>
      withTenant(env.t.db, env.tenantId, (tx) =>
        rotateEndpointSecret(tx, env.tenantId, {
          direction: 'outbound',
          endpointId: r.endpointId,
          overlapMinutes,
        }),
      );
    const { secret: fresh } = await rotate(60);
    // A receiver that has not switched yet verifies with the old secret.
    const first = await env.withdraw(ETH / 996n);
    await env.worker().runOnce();
    expect(r.rejected).toEqual([]);
    expect(statesFor(r, first.operationId)).toContain('REQUESTED');
    // One that has switched verifies with the new one.
    r.secret = fresh;
    const second = await env.withdraw(ETH / 995n);
    await env.worker().runOnce();
    expect(r.rejected).toEqual([]);
    expect(statesFor(r, second.operationId)).toContain('REQUESTED');

    // A rotation without overlap: the replaced secret signs nothing more.
    await rotate(0);
    r.secret = fresh;
    const third = await env.withdraw(ETH / 994n);
    await env.worker().runOnce();
    expect(statesFor(r, third.operationId)).toEqual([]);
    expect(r.rejected).toContain('No matching signature found');
  });
});
