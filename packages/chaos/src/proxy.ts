/**
 * A fault-injecting HTTP proxy for any upstream (the API server, the custodian, the chain node).
 * Unlike @idem/testing/chain's JSON-RPC proxy it forwards every method and path, its upstream can
 * move (a restarted server listens on a new port), and faults are queued: each one hits the next
 * `times` requests that match it. Every "after-forward" fault lets the upstream do the work first,
 * so only the answer is lost: the case idempotency and the UNKNOWN state exist for.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ProxyMode } from './schedule.ts';

export interface ProxyFault {
  mode: ProxyMode;
  times: number;
  delayMs: number;
  match: string | null;
}

export interface ChaosProxy {
  readonly url: string;
  setUpstream(url: string | null): void;
  inject(fault: ProxyFault): void;
  /** How many requests each mode actually hit (a queued fault nobody matched counts nothing). */
  readonly hits: Readonly<Record<ProxyMode, number>>;
  /** Requests that found no upstream (its process was down): answered 502, counted apart. */
  readonly upstreamDown: number;
  clearFaults(): void;
  close(): Promise<void>;
}

const bodyBytesMax = 1024 * 1024;
/** A hung answer is released after this long, so no socket outlives the run. */
const hangMsMax = 12_000;
const upstreamTimeoutMs = 20_000;
/** Hop-by-hop and length headers are the proxy's own business on each side. */
const skippedHeaders = new Set([
  'host',
  'connection',
  'content-length',
  'transfer-encoding',
  'keep-alive',
  'content-encoding',
]);

export async function startChaosProxy(initialUpstream: string | null): Promise<ChaosProxy> {
  let upstream = initialUpstream;
  let queue: ProxyFault[] = [];
  let upstreamDown = 0;
  const hits: Record<ProxyMode, number> = {
    'drop-after-forward': 0,
    'hang-after-forward': 0,
    '502-after-forward': 0,
    delay: 0,
  };
  const hanging = new Set<NodeJS.Timeout>();
  const sockets = new Set<import('node:net').Socket>();

  const takeFault = (signature: string): ProxyFault | null => {
    const index = queue.findIndex((fault) => fault.match === null || signature.includes(fault.match));
    const fault = queue[index];
    if (!fault) return null;
    fault.times -= 1;
    if (fault.times <= 0) queue.splice(index, 1);
    hits[fault.mode] += 1;
    return fault;
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const body = await readBody(request);
    const signature = `${request.method ?? 'GET'} ${request.url ?? '/'}\n${body.toString('utf8', 0, 2_048)}`;
    const fault = takeFault(signature);
    if (fault?.mode === 'delay') await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
    const target = upstream;
    if (!target) {
      upstreamDown += 1;
      response.writeHead(502, { 'content-type': 'text/plain' }).end('upstream down');
      return;
    }
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers)) {
      if (skippedHeaders.has(name) || value === undefined) continue;
      headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const method = request.method ?? 'GET';
    let upstreamResponse: Response;
    try {
      upstreamResponse = await fetch(`${target}${request.url ?? '/'}`, {
        method,
        headers,
        ...(method === 'GET' || method === 'HEAD' ? {} : { body }),
        signal: AbortSignal.timeout(upstreamTimeoutMs),
      });
    } catch {
      upstreamDown += 1;
      if (!response.headersSent)
        response.writeHead(502, { 'content-type': 'text/plain' }).end('upstream error');
      return;
    }
    const answer = Buffer.from(await upstreamResponse.arrayBuffer());
    switch (fault?.mode) {
      case 'drop-after-forward':
        request.socket.destroy();
        return;
      case '502-after-forward':
        response.writeHead(502, { 'content-type': 'text/plain' }).end('bad gateway (injected)');
        return;
      case 'hang-after-forward': {
        const timer = setTimeout(() => {
          hanging.delete(timer);
          request.socket.destroy();
        }, hangMsMax);
        hanging.add(timer);
        return;
      }
      default: {
        const out: Record<string, string> = {};
        upstreamResponse.headers.forEach((value, name) => {
          if (!skippedHeaders.has(name)) out[name] = value;
        });
        response.writeHead(upstreamResponse.status, out).end(answer);
      }
    }
  };

  const server: Server = createServer((request, response) => {
    handle(request, response).catch(() => {
      if (!response.headersSent) response.writeHead(502).end();
      else request.socket.destroy();
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    setUpstream(url) {
      upstream = url;
    },
    inject(fault) {
      queue.push({ ...fault });
    },
    hits,
    get upstreamDown() {
      return upstreamDown;
    },
    clearFaults() {
      queue = [];
    },
    async close() {
      for (const timer of hanging) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > bodyBytesMax) throw new Error('proxy body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
