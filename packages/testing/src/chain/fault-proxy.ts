/**
 * A real HTTP proxy in front of a real node that misbehaves on purpose, in two ways:
 * - `fault`: every request is forwarded first and only the answer is lost (hang, 502, reset):
 *   exactly the "provider accepted, caller saw an error" case the ambiguous class exists for.
 * - `addRule`: per-call JSON-RPC rules, as a node behind a load balancer misbehaves: answer HTTP
 *   429 without forwarding, hang until the caller's deadline, or serve a lagging node's view
 *   (an older head: block tags rewritten to the lag height, blocks, receipts and transactions
 *   above it unknown, state reads above it refused). The first matching rule applies.
 * Kept here, under `@idem/testing/chain`, so workers tests and the chaos run use the same one.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ProxyFault =
  | 'none'
  | 'forward-then-hang'
  | 'forward-then-502'
  | 'forward-then-reset'
  /** The request never reaches the node: the connection is reset before anything is forwarded. */
  | 'reset-without-forward';

export type RpcFaultMode = '429' | 'hang' | 'lag';

export interface RpcFaultRule {
  /** The JSON-RPC methods the rule applies to. */
  methods: readonly string[];
  mode: RpcFaultMode;
  /** For `lag`: the block height the lagging node is at. */
  lagHeight?: number;
  /** Only calls whose params satisfy this (e.g. blocks read without their transactions). */
  when?: (params: readonly unknown[]) => boolean;
  /** How many calls it hits before it is spent; unlimited when absent. */
  times?: number;
}

/** A rule in force; `hits` counts the calls it actually changed (a test asserts the fault happened). */
export interface ActiveRule {
  readonly rule: RpcFaultRule;
  readonly hits: number;
}

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
  /** Every raw transaction forwarded to the node (eth_sendRawTransaction), in order. */
  readonly rawTransactions: readonly string[];
  /** When each of `rawTransactions` was forwarded (epoch ms, same index). */
  readonly rawTransactionsAt: readonly number[];
  addRule(rule: RpcFaultRule): ActiveRule;
  clearRules(): void;
  close(): Promise<void>;
}

interface RpcCall {
  jsonrpc?: string;
  id?: unknown;
  method: string;
  params?: unknown[];
}

const bodyBytesMax = 1024 * 1024;
/** A hung call is released after this long, so no socket outlives a test. */
const hangMsMax = 30_000;

/** What the proxy's handlers share: the upstream, the faults in force and what went through. */
interface ProxyState {
  readonly upstreamUrl: string;
  fault: ProxyFault;
  spareMethods: string[];
  forwarded: number;
  readonly rawTransactions: string[];
  readonly rawTransactionsAt: number[];
  /** Requests left unanswered on purpose; close() resets their sockets. */
  readonly hanging: Set<IncomingMessage>;
  rules: { rule: RpcFaultRule; hits: number; left: number }[];
}

export async function startFaultProxy(upstreamUrl: string): Promise<FaultProxy> {
  const state: ProxyState = {
    upstreamUrl,
    fault: 'none',
    spareMethods: [],
    forwarded: 0,
    rawTransactions: [],
    rawTransactionsAt: [],
    hanging: new Set(),
    rules: [],
  };
  const server: Server = createServer((request, response) => {
    handle(state, request, response).catch(() => {
      if (!response.headersSent) response.writeHead(502).end();
      else request.socket.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return proxyHandle(state, server, `http://127.0.0.1:${port}`);
}

/** The test's side of a running proxy: its faults and rules to set, what it forwarded, close(). */
function proxyHandle(state: ProxyState, server: Server, url: string): FaultProxy {
  return {
    url,
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
      return state.forwarded;
    },
    rawTransactions: state.rawTransactions,
    rawTransactionsAt: state.rawTransactionsAt,
    addRule(rule) {
      const active = { rule, hits: 0, left: rule.times ?? Number.POSITIVE_INFINITY };
      state.rules.push(active);
      return {
        rule,
        get hits() {
          return active.hits;
        },
      };
    },
    clearRules() {
      state.rules = [];
    },
    async close() {
      for (const request of state.hanging) request.socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** One request: a per-call rule that hits decides (429, hang, lag); otherwise the proxy-wide fault. */
async function handle(state: ProxyState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const body = await readBody(request);
  let parsed: RpcCall | RpcCall[] | null = null;
  try {
    parsed = JSON.parse(body) as RpcCall | RpcCall[];
  } catch {
    parsed = null;
  }
  const calls = parsed === null ? [] : Array.isArray(parsed) ? parsed : [parsed];
  const hit = calls.map((call) => ({ call, rule: ruleFor(state, call) }));
  if (hit.some((h) => h.rule?.mode === '429')) {
    // A rate limiter answers before the node sees anything.
    response
      .writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' })
      .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32005, message: 'rate limited' } }));
    return;
  }
  if (hit.some((h) => h.rule?.mode === 'hang')) return hang(state, request);
  if (hit.some((h) => h.rule?.mode === 'lag'))
    return answerLagging(state, response, hit, Array.isArray(parsed));
  await answerWithFault(state, request, response, body);
}

/** A request one of whose calls a `lag` rule hit: those calls as the lagging node answers them, the rest forwarded. */
async function answerLagging(
  state: ProxyState,
  response: ServerResponse,
  hit: { call: RpcCall; rule: RpcFaultRule | null }[],
  batch: boolean,
): Promise<void> {
  const replies = await Promise.all(
    hit.map(async ({ call, rule }) =>
      rule?.mode === 'lag'
        ? lagging(state, call, rule.lagHeight ?? 0)
        : JSON.parse((await forward(state, JSON.stringify(call))).text),
    ),
  );
  const out = batch ? replies : replies[0];
  response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
}

/** The proxy-wide fault (none for a request of spared methods only): forwarded, then the answer lost or not. */
async function answerWithFault(
  state: ProxyState,
  request: IncomingMessage,
  response: ServerResponse,
  body: string,
): Promise<void> {
  const fault = spared(body, state.spareMethods) ? 'none' : state.fault;
  if (fault === 'reset-without-forward') {
    // The request never reaches the node.
    request.socket.destroy();
    return;
  }
  const upstream = await forward(state, body);
  switch (fault) {
    case 'none':
      response.writeHead(upstream.status, { 'content-type': 'application/json' }).end(upstream.text);
      return;
    case 'forward-then-502':
      response.writeHead(502, { 'content-type': 'text/plain' }).end('bad gateway');
      return;
    case 'forward-then-reset':
      request.socket.destroy();
      return;
    case 'forward-then-hang':
      state.hanging.add(request);
      return;
  }
}

/** Sends `body` to the node, recording raw transactions and counting what reached it. */
async function forward(state: ProxyState, body: string): Promise<{ status: number; text: string }> {
  for (const call of callsOf(body)) {
    if (call.method === 'eth_sendRawTransaction' && typeof call.params?.[0] === 'string') {
      state.rawTransactions.push(call.params[0]);
      state.rawTransactionsAt.push(Date.now());
    }
  }
  const upstream = await fetch(state.upstreamUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    signal: AbortSignal.timeout(5_000),
  });
  const text = await upstream.text();
  state.forwarded++;
  return { status: upstream.status, text };
}

/** The first rule in force that matches `call`, spending one of its uses; null when none does. */
function ruleFor(state: ProxyState, call: RpcCall): RpcFaultRule | null {
  const active = state.rules.find(
    (r) => r.left > 0 && r.rule.methods.includes(call.method) && (r.rule.when?.(call.params ?? []) ?? true),
  );
  if (!active) return null;
  active.left -= 1;
  active.hits += 1;
  return active.rule;
}

function hang(state: ProxyState, request: IncomingMessage): void {
  // Never answer; the caller's deadline decides. close() (or the cap) releases the socket.
  state.hanging.add(request);
  setTimeout(() => {
    state.hanging.delete(request);
    request.socket.destroy();
  }, hangMsMax).unref();
}

/** One call as a lagging node would answer it. */
async function lagging(state: ProxyState, call: RpcCall, height: number): Promise<unknown> {
  const view = lagView(call, height);
  if ('answer' in view) return { jsonrpc: '2.0', id: call.id, ...view.answer };
  const { text } = await forward(state, JSON.stringify({ ...call, params: view.params }));
  const reply = JSON.parse(text) as { result?: unknown };
  if (view.after && reply.result !== undefined) reply.result = view.after(reply.result);
  return reply;
}

type LagView =
  | { answer: { result: unknown } | { error: { code: number; message: string } } }
  | { params: unknown[]; after?: (result: unknown) => unknown };

const movingTags = new Set(['latest', 'pending', 'safe', 'finalized']);
/** Where each state read carries its block tag. */
const stateReadTagIndex: Record<string, number> = {
  eth_getTransactionCount: 1,
  eth_getBalance: 1,
  eth_getCode: 1,
  eth_call: 1,
  eth_getStorageAt: 2,
};

/**
 * How a node whose head is `height` answers `call`: moving tags mean `height`, anything mined
 * above it does not exist yet, and state above it cannot be read ("header not found", as geth).
 */
function lagView(call: RpcCall, height: number): LagView {
  const params = [...(call.params ?? [])];
  const hex = (n: number) => `0x${n.toString(16)}`;
  /** The tag as the lagging node reads it, or null when it names a block it does not have. */
  const tag = (value: unknown): unknown => {
    if (value === undefined || (typeof value === 'string' && movingTags.has(value))) return hex(height);
    if (typeof value === 'string' && value.startsWith('0x'))
      return Number(BigInt(value)) > height ? null : value;
    return value;
  };
  const above = (value: unknown) => typeof value === 'string' && Number(BigInt(value)) > height;
  const unknownAbove = (result: unknown) => {
    const mined = (result as { blockNumber?: unknown; number?: unknown } | null) ?? null;
    return mined && (above(mined.blockNumber) || above(mined.number)) ? null : result;
  };
  switch (call.method) {
    case 'eth_blockNumber':
      return { answer: { result: hex(height) } };
    case 'eth_getBlockByNumber': {
      const at = tag(params[0]);
      if (at === null) return { answer: { result: null } };
      params[0] = at;
      return { params };
    }
    case 'eth_getBlockByHash':
    case 'eth_getTransactionReceipt':
    case 'eth_getTransactionByHash':
      return { params, after: unknownAbove };
    case 'eth_getLogs': {
      const filter = { ...((params[0] as Record<string, unknown> | undefined) ?? {}) };
      if (filter.fromBlock !== undefined && above(tag(filter.fromBlock) ?? filter.fromBlock)) {
        return { answer: { result: [] } };
      }
      if (!filter.blockHash) filter.toBlock = tag(filter.toBlock) ?? hex(height);
      params[0] = filter;
      return {
        params,
        after: (logs) => (logs as { blockNumber?: string }[]).filter((log) => !above(log.blockNumber)),
      };
    }
    default: {
      const index = stateReadTagIndex[call.method];
      if (index === undefined) return { params };
      const at = tag(params[index]);
      if (at === null) return { answer: { error: { code: -32000, message: 'header not found' } } };
      params[index] = at;
      return { params };
    }
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

function callsOf(body: string): RpcCall[] {
  try {
    const parsed = JSON.parse(body) as RpcCall | RpcCall[];
    return Array.isArray(parsed) ? parsed : [parsed];
  } catch {
    return [];
  }
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
