/** A real HTTP endpoint that receives the simulator's webhooks and verifies each with the adapter. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type VerifiedWebhook, verifyWebhook } from '@idem/rails';

export interface ReceivedWebhook {
  readonly rawBody: string;
  readonly verified: VerifiedWebhook | null;
  readonly error: string | null;
}

export interface WebhookReceiver {
  readonly url: string;
  readonly received: ReceivedWebhook[];
  /** Resolves once `count` deliveries arrived; rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedWebhook[]>;
  clear(): void;
  close(): Promise<void>;
}

const bodyBytesMax = 256 * 1024;

export async function startWebhookReceiver(secret: string): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of request) {
      size += (chunk as Buffer).length;
      if (size > bodyBytesMax) {
        response.writeHead(413).end();
        return;
      }
      chunks.push(chunk as Buffer);
    }
    const rawBody = Buffer.concat(chunks).toString('utf8');
    try {
      received.push({ rawBody, verified: verifyWebhook(rawBody, request.headers, secret), error: null });
      response.writeHead(204).end();
    } catch (error) {
      received.push({ rawBody, verified: null, error: String(error) });
      response.writeHead(400).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/webhooks/custodian`,
    received,
    async waitFor(count, timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs;
      while (received.length < count) {
        if (Date.now() > deadline) throw new Error(`expected ${count} webhooks, got ${received.length}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return [...received];
    },
    clear() {
      received.length = 0;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
