/**
 * A real HTTP proxy in front of a real node that loses answers on purpose. Every fault forwards
 * the request first, so the node really receives the transaction and only the answer is lost:
 * exactly the "provider accepted, caller saw an error" case the ambiguous class exists for.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ProxyFault =
  | 'none'
  | 'forward-then-hang'
  | 'forward-then-502'
  | 'forward-then-reset'
  /** The request never reaches the node: the connection is reset before anything is forwarded. */
  | 'reset-without-forward';

export interface FaultProxy {
  readonly url: string;
  fault: ProxyFault;
  /**
   * JSON-RPC methods the fault never applies to (default none). Fees are read from the node before
   * signing, so a test that means to lose a send and what follows it spares `eth_feeHistory`.
   */
  spareMethods: string[];
  /** How many requests reached the upstream through this proxy. */
  readonly forwarded: number;
  close(): Promise<void>;
}

const bodyBytesMax = 1024 * 1024;

export async function startFaultProxy(upstreamUrl: string): Promise<FaultProxy> {
  let forwarded = 0;
  const state: { fault: ProxyFault; spareMethods: string[] } = { fault: 'none', spareMethods: [] };
  const hanging = new Set<IncomingMessage>();

  const server: Server = createServer(async (request, response) => {
    const body = await readBody(request);
    const fault = spared(body, state.spareMethods) ? 'none' : state.fault;
    if (fault === 'reset-without-forward') {
      request.socket.destroy();
      return;
    }
    const upstream = await fetch(upstreamUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(5_000),
    });
    const text = await upstream.text();
    forwarded++;
    switch (fault) {
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
    get spareMethods() {
      return state.spareMethods;
    },
    set spareMethods(value: string[]) {
      state.spareMethods = value;
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

/** Whether every call of a request (one call or a batch) is of a spared method. */
function spared(body: string, methods: string[]): boolean {
  if (methods.length === 0) return false;
  try {
    const parsed = JSON.parse(body) as { method?: string } | { method?: string }[];
    return (Array.isArray(parsed) ? parsed : [parsed]).every((call) => methods.includes(call.method ?? ''));
  } catch {
    return false;
  }
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
