/**
 * A real HTTP proxy in front of a real node that loses answers on purpose. Every fault forwards
 * the request first, so the node really receives the transaction and only the answer is lost:
 * exactly the "provider accepted, caller saw an error" case the ambiguous class exists for.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ProxyFault = 'none' | 'forward-then-hang' | 'forward-then-502' | 'forward-then-reset';

export interface FaultProxy {
  readonly url: string;
  fault: ProxyFault;
  /** How many requests reached the upstream through this proxy. */
  readonly forwarded: number;
  close(): Promise<void>;
}

const bodyBytesMax = 1024 * 1024;

export async function startFaultProxy(upstreamUrl: string): Promise<FaultProxy> {
  let forwarded = 0;
  const state: { fault: ProxyFault } = { fault: 'none' };
  const hanging = new Set<IncomingMessage>();

  const server: Server = createServer(async (request, response) => {
    const body = await readBody(request);
    const upstream = await fetch(upstreamUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(5_000),
    });
    const text = await upstream.text();
    forwarded++;
    switch (state.fault) {
      case 'none':
        response.writeHead(upstream.status, { 'content-type': 'application/json' }).end(text);
        return;
      case 'forward-then-502':
        response.writeHead(502, { 'content-type': 'text/plain' }).end('bad gateway');
        return;
      case 'forward-then-reset':
        request.socket.destroy();
        return;
      case 'forward-then-hang':
        // Never answer; the caller's deadline decides. close() releases the socket.
        hanging.add(request);
        return;
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    get fault() {
      return state.fault;
    },
    set fault(value: ProxyFault) {
      state.fault = value;
    },
    get forwarded() {
      return forwarded;
    },
    async close() {
      for (const request of hanging) request.socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > bodyBytesMax) throw new Error('proxy body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
