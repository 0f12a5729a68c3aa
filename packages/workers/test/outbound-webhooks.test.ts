import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { operationWebhookSchema } from '@idem/contracts';
import { createOutboundEndpoint, rowsOf } from '@idem/core';
import { sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Environment, ETH, LOCAL_RECEIVERS, startEnvironment } from './environment.ts';

/** The operator's receiver: verifies every delivery's signature, answers as told. */
interface Receiver {
  url: string;
  secret: string;
  received: { id: string; body: { data: { operationId: string; to: string } & Record<string, unknown> } }[];
  failNext: number;
  close(): Promise<void>;
}

let env: Environment;
let receiver: Receiver;

async function startReceiver(): Promise<Receiver> {
  const state: Receiver = { url: '', secret: '', received: [], failNext: 0, close: async () => {} };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      try {
        new Webhook(state.secret).verify(raw, request.headers as Record<string, string>);
      } catch {
        response.writeHead(401).end();
        return;
      }
      if (state.failNext > 0) {
        state.failNext -= 1;
        response.writeHead(503).end();
        return;
      }
      state.received.push({ id: String(request.headers['webhook-id']), body: JSON.parse(raw) });
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/idem`;
  state.close = () => new Promise((resolve) => server.close(() => resolve()));
  return state;
}

beforeAll(async () => {
  env = await startEnvironment();
  receiver = await startReceiver();
  const endpoint = await createOutboundEndpoint(
    env.t.db,
    env.tenantId,
    { url: receiver.url },
    LOCAL_RECEIVERS,
  );
  receiver.secret = endpoint.secret;
});
afterAll(async () => {
  await receiver.close();
  await env.close();
});

/** Makes retries due now instead of after their backoff. */
async function dueNow(): Promise<void> {
  await env.t.db.execute(sql`update work_items set available_at = now() where status = 'pending'`);
  await env.t.db.execute(sql`update webhook_deliveries set available_at = now() where status = 'pending'`);
}

describe('outbound webhooks to the operator', () => {
  it('I15 the CONFIRMED notification says where the money went, in the documented shape', async () => {
    const op = await env.withdraw(ETH / 997n);
    const worker = env.worker();
    await worker.runOnce();
    await env.mine(2);
    await worker.runOnce();
    await worker.runOnce();
    const confirmed = receiver.received.find(
      (r) => r.body.data.operationId === op.operationId && r.body.data.to === 'CONFIRMED',
    );
    const sent = await env.operation(op.operationId);
    expect(sent.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    // The one schema the OpenAPI document publishes for this event (contracts), strictly.
    expect(operationWebhookSchema.parse(confirmed?.body).data).toMatchObject({
      txHash: sent.txHash,
      custodianTransferId: null,
      custodianTxHash: null,
    });
  });
  it('every state change of a withdrawal reaches the operator once, signed, without the destination', async () => {
    const op = await env.withdraw(ETH / 1000n);
    const worker = env.worker();
    await worker.runOnce();
    await env.mine(2);
    await worker.runOnce();
    await worker.runOnce();
    const states = receiver.received
      .filter((r) => r.body.data.operationId === op.operationId)
      .map((r) => r.body.data.to);
    expect(states).toEqual(['REQUESTED', 'APPROVED', 'SIGNING', 'SIGNED', 'BROADCAST', 'CONFIRMED']);
    const ids = receiver.received.map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(JSON.stringify(receiver.received)).not.toContain(op.destination ?? 'never');
  });

  it('a receiver that fails is retried with backoff, then the notification arrives once', async () => {
    const before = receiver.received.length;
    receiver.failNext = 2;
    const op = await env.withdraw(ETH / 999n);
    const worker = env.worker();
    await worker.runOnce(); // first attempt fails (REQUESTED and later notifications queue behind it)
    await dueNow();
    await worker.runOnce();
    await dueNow();
    await worker.runOnce();
    await dueNow();
    await worker.runOnce();
    const mine = receiver.received.slice(before).filter((r) => r.body.data.operationId === op.operationId);
    expect(mine.map((r) => r.body.data.to)).toContain('REQUESTED');
    expect(mine.filter((r) => r.body.data.to === 'REQUESTED')).toHaveLength(1);
  });

  it('C15 a notification that keeps failing is dead-lettered with an alert, not dropped silently', async () => {
    receiver.failNext = 1_000;
    const op = await env.withdraw(ETH / 998n);
    await env.worker().runOnce();
    await env.t.db.execute(
      sql`update webhook_deliveries set attempts = 7, available_at = now() where operation_id = ${op.operationId}`,
    );
    await env.worker().runOnce();
    const rows = rowsOf<{ status: string; last_error: string }>(
      await env.t.db.execute(
        sql`select status, last_error from webhook_deliveries where operation_id = ${op.operationId} and attempts = 8`,
      ),
    );
    // Stored as the generic failure staff see; the receiver's status is in the alert's log line.
    expect(rows.some((row) => row.status === 'dead' && row.last_error === 'delivery failed')).toBe(true);
    expect(env.logLines.some((line) => line.includes('dead-lettered') && line.includes('HTTP 503'))).toBe(
      true,
    );
    receiver.failNext = 0;
  });
});
