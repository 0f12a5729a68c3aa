/**
 * A custodian that behaves like a typical REST custody provider and misbehaves on request, so the
 * adapter's promises can be tested over real HTTP against a separate process.
 *
 * Real routes: POST /v1/transfers (idempotent on externalReference unless told otherwise),
 * GET /v1/transfers?externalReference=..., GET /v1/transfers/:id, GET /v1/transfers and
 * GET /v1/deposits by time window, GET /v1/balances (the account's holdings: funded through
 * /_control, less completed transfers; misreported on request). Status and deposit webhooks are
 * signed with Standard Webhooks. Test routes: POST /_control (zod-validated, see
 * `controlBodySchema`; it also makes deposits arrive), POST /_seed (transfers put on the books
 * directly, see `seedBodySchema`) and GET /_ledger (every transfer and deposit, counts per
 * reference, webhook deliveries).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import {
  type ControlBody,
  type CreateTransferBody,
  type CustodianDeposit,
  type CustodianTransfer,
  controlBodySchema,
  createTransferBodySchema,
  type Ledger,
  type SubmitFault,
  seedBodySchema,
  submitFaultSchema,
  type WebhookDelivery,
  type WebhookEventType,
} from './protocol.ts';

export interface CustodianSimulatorOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** Standard Webhooks secret (`whsec_...`) used to sign every status webhook. */
  webhookSecret: string;
  webhookUrl?: string | null;
  /** When set, /v1 routes require `authorization: Bearer <apiKey>`. */
  apiKey?: string;
  settlement?: NonNullable<ControlBody['settlement']>;
}

export interface RunningCustodianSimulator {
  readonly url: string;
  close(): Promise<void>;
}

export const faultHeader = 'x-simulator-fault';

const requestBodyBytesMax = 64 * 1024;
const seedBodyBytesMax = 4 * 1024 * 1024;
const transfersMax = 100_000;
const deliveriesLogMax = 1_000;
const webhookAttemptsMax = 3;
const webhookTimeoutMs = 2_000;
const webhookBackoffMs = 100;

export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

export async function startCustodianSimulator(
  options: CustodianSimulatorOptions,
): Promise<RunningCustodianSimulator> {
  const signer = new Webhook(options.webhookSecret);
  const transfers: CustodianTransfer[] = [];
  /** What the account holds per asset: funded, less every completed transfer. */
  const holdings = new Map<string, bigint>();
  const misreports = new Map<string, bigint>();
  const deposits: CustodianDeposit[] = [];
  const deliveries: Ledger['webhookDeliveries'] = [];
  const timers = new Set<NodeJS.Timeout>();
  const hanging = new Set<Socket>();
  const heldEvents = new Map<string, { webhookId: string; type: string; body: string }[]>();
  let shutdown = new AbortController();
  let deliveryChain: Promise<void> = Promise.resolve();

  const defaults = {
    fault: { fault: 'none' as SubmitFault, remaining: null as number | null },
    idempotency: 'reference' as 'reference' | 'none',
    webhooks: {
      url: options.webhookUrl ?? null,
      delivery: 'normal' as WebhookDelivery,
      lateMs: 500,
      drop: [] as string[],
    },
    settlement: options.settlement ?? { outcome: 'complete' as const, afterMs: 50 },
  };
  let state = structuredClone(defaults);

  function later(ms: number, action: () => void): void {
    const timer = setTimeout(() => {
      timers.delete(timer);
      action();
    }, ms);
    timers.add(timer);
  }

  // --- Webhooks -----------------------------------------------------------------------------

  function enqueueDelivery(webhookId: string, type: string, body: string): void {
    // One delivery at a time, in emission order: misordering happens only when asked for.
    // Bound to the current generation: a reset or close cancels what was queued before it.
    const { signal } = shutdown;
    deliveryChain = deliveryChain.then(() => deliver(webhookId, type, body, signal));
  }

  async function deliver(
    webhookId: string,
    type: string,
    body: string,
    cancelled: AbortSignal,
  ): Promise<void> {
    const url = state.webhooks.url;
    if (!url) return;
    for (let attempt = 1; attempt <= webhookAttemptsMax; attempt++) {
      if (cancelled.aborted) return;
      const timestamp = new Date();
      let status: number | null = null;
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'webhook-id': webhookId,
            'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
            'webhook-signature': signer.sign(webhookId, timestamp, body),
          },
          body,
          signal: AbortSignal.any([cancelled, AbortSignal.timeout(webhookTimeoutMs)]),
        });
        status = response.status;
        await response.body?.cancel();
      } catch {
        status = null;
      }
      if (deliveries.length < deliveriesLogMax) deliveries.push({ webhookId, type, status, body });
      if (status !== null && status >= 200 && status < 300) return;
      await new Promise((resolve) => setTimeout(resolve, webhookBackoffMs * attempt));
    }
  }

  function emit(transfer: CustodianTransfer, type: WebhookEventType): void {
    const webhookId = `msg_${transfer.id}_${type.replace('transfer.', '')}`;
    const body = JSON.stringify({ type, occurredAt: transfer.updatedAt, data: transfer });
    const { delivery, lateMs, drop } = state.webhooks;
    if (drop.includes(type)) return;
    switch (delivery) {
      case 'normal':
        enqueueDelivery(webhookId, type, body);
        return;
      case 'duplicate':
        enqueueDelivery(webhookId, type, body);
        enqueueDelivery(webhookId, type, body);
        return;
      case 'late':
        later(lateMs, () => enqueueDelivery(webhookId, type, body));
        return;
      case 'conflicting-body': {
        enqueueDelivery(webhookId, type, body);
        const altered = { ...transfer, amountMinor: (BigInt(transfer.amountMinor) + 1n).toString() };
        enqueueDelivery(
          webhookId,
          type,
          JSON.stringify({ type, occurredAt: transfer.updatedAt, data: altered }),
        );
        return;
      }
      case 'out-of-order': {
        // Hold a transfer's events until its final one, then send them newest first.
        const held = heldEvents.get(transfer.id) ?? [];
        held.push({ webhookId, type, body });
        if (type === 'transfer.submitted') {
          heldEvents.set(transfer.id, held);
          return;
        }
        heldEvents.delete(transfer.id);
        for (const event of held.reverse()) enqueueDelivery(event.webhookId, event.type, event.body);
        return;
      }
    }
  }

  /** A deposit's one webhook, in the inbound `deposit.confirmed` shape; delays and repeats apply. */
  function emitDeposit(deposit: CustodianDeposit): void {
    const type = 'deposit.confirmed';
    const { delivery, lateMs, drop } = state.webhooks;
    if (drop.includes(type)) return;
    const webhookId = `msg_${deposit.id}_deposit`;
    const { id, accountId, asset, amountMinor, txHash } = deposit;
    const body = JSON.stringify({
      type,
      occurredAt: deposit.confirmedAt,
      data: { reference: id, accountId, asset, amountMinor, ...(txHash ? { txHash } : {}) },
    });
    if (delivery === 'late') later(lateMs, () => enqueueDelivery(webhookId, type, body));
    else enqueueDelivery(webhookId, type, body);
    if (delivery === 'duplicate') enqueueDelivery(webhookId, type, body);
  }

  function receiveDeposit(input: NonNullable<ControlBody['deposit']>): CustodianDeposit {
    const deposit: CustodianDeposit = {
      id: `dep_${randomUUID()}`,
      network: input.network,
      address: input.address,
      accountId: input.accountId,
      asset: input.asset,
      amountMinor: input.amountMinor,
      txHash: randomBytes(32).toString('hex'),
      status: 'confirmed',
      confirmedAt: input.confirmedAt ?? new Date().toISOString(),
    };
    deposits.push(deposit);
    emitDeposit(deposit);
    return deposit;
  }

  function settle(transfer: CustodianTransfer): void {
    const { outcome, afterMs } = state.settlement;
    if (outcome === 'hold') return;
    later(afterMs, () => {
      const now = new Date().toISOString();
      if (outcome === 'complete') {
        holdings.set(transfer.asset, (holdings.get(transfer.asset) ?? 0n) - BigInt(transfer.amountMinor));
        Object.assign(transfer, {
          status: 'completed',
          txHash: `0x${randomBytes(32).toString('hex')}`,
          updatedAt: now,
        });
        emit({ ...transfer }, 'transfer.completed');
      } else {
        Object.assign(transfer, {
          status: 'failed',
          failureReason: 'simulated on-chain failure',
          updatedAt: now,
        });
        emit({ ...transfer }, 'transfer.failed');
      }
    });
  }

  // --- Transfers ----------------------------------------------------------------------------

  function samePayload(transfer: CustodianTransfer, body: CreateTransferBody): boolean {
    return (
      transfer.asset === body.asset &&
      transfer.amountMinor === body.amountMinor &&
      transfer.destination === body.destination &&
      transfer.memo === body.memo
    );
  }

  function nextFault(request: IncomingMessage): SubmitFault | { invalid: string } {
    const header = request.headers[faultHeader];
    if (typeof header === 'string') {
      const parsed = submitFaultSchema.safeParse(header);
      return parsed.success ? parsed.data : { invalid: header };
    }
    const { fault, remaining } = state.fault;
    if (remaining !== null) {
      state.fault = remaining <= 1 ? { fault: 'none', remaining: null } : { fault, remaining: remaining - 1 };
    }
    return fault;
  }

  async function createTransfer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const body = await readJson(request, response);
    if (body === undefined) return;
    const parsed = createTransferBodySchema.safeParse(body);
    if (!parsed.success) {
      sendJson(response, 400, {
        error: 'invalid_request',
        issues: parsed.error.issues.map((i) => i.message),
      });
      return;
    }
    const fault = nextFault(request);
    if (typeof fault !== 'string') {
      sendJson(response, 400, { error: 'invalid_fault', fault: fault.invalid });
      return;
    }
    if (fault === 'reject') {
      sendJson(response, 422, { error: 'rejected', reason: 'destination refused by custody policy' });
      return;
    }
    const input = parsed.data;
    let transfer: CustodianTransfer;
    let replayed = false;
    const existing =
      state.idempotency === 'reference'
        ? transfers.find((t) => t.externalReference === input.externalReference)
        : undefined;
    if (existing) {
      if (!samePayload(existing, input)) {
        sendJson(response, 409, { error: 'reference_conflict', id: existing.id });
        return;
      }
      transfer = existing;
      replayed = true;
    } else {
      if (transfers.length >= transfersMax) {
        sendJson(response, 507, { error: 'ledger_full' });
        return;
      }
      const now = new Date().toISOString();
      transfer = {
        id: `trf_${randomUUID()}`,
        ...input,
        status: 'submitted',
        createdAt: now,
        updatedAt: now,
      };
      transfers.push(transfer);
      emit({ ...transfer }, 'transfer.submitted');
      settle(transfer);
    }

    switch (fault) {
      case 'none':
        sendJson(response, replayed ? 200 : 201, transfer, replayed ? { 'idempotent-replayed': 'true' } : {});
        return;
      case 'accept-then-timeout':
        // The transfer exists; the answer never comes. close() releases the socket.
        hanging.add(request.socket);
        request.socket.once('close', () => hanging.delete(request.socket));
        return;
      case 'accept-then-5xx':
        sendJson(response, 503, { error: 'service_unavailable' });
        return;
      case 'accept-then-reset':
        request.socket.destroy();
        return;
      case 'ok-without-reference':
        sendJson(response, 200, { status: 'received' });
        return;
      case 'ok-id-only':
        sendJson(response, 200, { id: transfer.id });
        return;
    }
  }

  // --- Routing ------------------------------------------------------------------------------

  const server = createServer((request, response) => {
    route(request, response).catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 500, { error: 'internal', message: String(error) });
      else response.destroy();
    });
  });
  // Hung sockets are intentional for one fault; anything else idle this long is abandoned.
  server.requestTimeout = 30_000;

  async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://simulator');
    const path = url.pathname;
    if (
      path.startsWith('/v1/') &&
      options.apiKey &&
      request.headers.authorization !== `Bearer ${options.apiKey}`
    ) {
      sendJson(response, 401, { error: 'unauthorized' });
      return;
    }
    if (request.method === 'POST' && path === '/v1/transfers') return createTransfer(request, response);
    if (request.method === 'GET' && path === '/v1/deposits') {
      sendJson(response, 200, { data: inWindow(deposits, (d) => d.confirmedAt, url.searchParams) });
      return;
    }
    if (request.method === 'GET' && path === '/v1/transfers') {
      const reference = url.searchParams.get('externalReference');
      if (!reference && url.searchParams.has('from')) {
        sendJson(response, 200, { data: inWindow(transfers, (t) => t.updatedAt, url.searchParams) });
        return;
      }
      if (!reference) {
        // The whole account, a page at a time (reconciliation reads it). The books only grow, so a
        // cursor is a position in them: pages neither skip nor repeat while transfers are added.
        const cursor = url.searchParams.get('cursor');
        const position = cursor === null ? 0 : Number(/^c_(\d{1,9})$/.exec(cursor)?.[1] ?? Number.NaN);
        if (!Number.isSafeInteger(position) || position > transfers.length) {
          sendJson(response, 400, { error: 'invalid_cursor' });
          return;
        }
        const limit = Math.min(Math.max(Number(url.searchParams.get('limit') ?? 100) || 100, 1), 100);
        const data = transfers.slice(position, position + limit);
        const end = position + data.length;
        sendJson(response, 200, { data, nextCursor: end < transfers.length ? `c_${end}` : null });
        return;
      }
      sendJson(response, 200, {
        data: transfers.filter((t) => t.externalReference === reference).slice(0, 100),
      });
      return;
    }
    if (request.method === 'GET' && path === '/v1/balances') {
      const assets = new Set([...holdings.keys(), ...misreports.keys()]);
      const data = [...assets].sort().map((asset) => ({
        asset,
        amountMinor: ((holdings.get(asset) ?? 0n) + (misreports.get(asset) ?? 0n)).toString(),
      }));
      sendJson(response, 200, { asOf: new Date().toISOString(), data });
      return;
    }
    const byId = /^\/v1\/transfers\/([\w-]{1,128})$/.exec(path);
    if (request.method === 'GET' && byId) {
      const transfer = transfers.find((t) => t.id === byId[1]);
      if (transfer) sendJson(response, 200, transfer);
      else sendJson(response, 404, { error: 'not_found' });
      return;
    }
    if (request.method === 'POST' && path === '/_control') {
      const body = await readJson(request, response);
      if (body === undefined) return;
      const parsed = controlBodySchema.safeParse(body);
      if (!parsed.success) {
        sendJson(response, 400, {
          error: 'invalid_control',
          issues: parsed.error.issues.map((i) => i.message),
        });
        return;
      }
      const deposit = applyControl(parsed.data);
      sendJson(response, 200, { ok: true, ...(deposit ? { deposit } : {}) });
      return;
    }
    if (request.method === 'POST' && path === '/_seed') {
      const body = await readJson(request, response, seedBodyBytesMax);
      if (body === undefined) return;
      const parsed = seedBodySchema.safeParse(body);
      const known = new Set(transfers.map((t) => t.id));
      if (
        !parsed.success ||
        parsed.data.transfers.some((t) => known.has(t.id)) ||
        transfers.length + parsed.data.transfers.length > transfersMax
      ) {
        sendJson(response, 400, { error: 'invalid_seed' });
        return;
      }
      transfers.push(...parsed.data.transfers);
      sendJson(response, 200, { ok: true, transfers: transfers.length });
      return;
    }
    if (request.method === 'GET' && path === '/_ledger') {
      const countsByReference: Record<string, number> = {};
      for (const t of transfers)
        countsByReference[t.externalReference] = (countsByReference[t.externalReference] ?? 0) + 1;
      const ledger: Ledger = { transfers, deposits, countsByReference, webhookDeliveries: deliveries };
      sendJson(response, 200, ledger);
      return;
    }
    sendJson(response, 404, { error: 'no_such_route' });
  }

  function applyControl(control: ControlBody): CustodianDeposit | null {
    if (control.reset) {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      transfers.length = 0;
      holdings.clear();
      misreports.clear();
      deposits.length = 0;
      deliveries.length = 0;
      heldEvents.clear();
      shutdown.abort();
      shutdown = new AbortController();
      deliveryChain = Promise.resolve();
      state = structuredClone(defaults);
    }
    if (control.fault) state.fault = { fault: control.fault, remaining: control.faultTimes ?? null };
    if (control.idempotency) state.idempotency = control.idempotency;
    if (control.webhooks) {
      const { url, delivery, lateMs, drop } = control.webhooks;
      if (url !== undefined) state.webhooks.url = url;
      if (delivery) state.webhooks.delivery = delivery;
      if (lateMs !== undefined) state.webhooks.lateMs = lateMs;
      if (drop) state.webhooks.drop = drop;
    }
    if (control.settlement) state.settlement = control.settlement;
    if (control.fund) {
      const { asset, amountMinor } = control.fund;
      holdings.set(asset, (holdings.get(asset) ?? 0n) + BigInt(amountMinor));
    }
    if (control.misreportBalance === null) misreports.clear();
    else if (control.misreportBalance) {
      misreports.set(control.misreportBalance.asset, BigInt(control.misreportBalance.deltaMinor));
    }
    return control.deposit ? receiveDeposit(control.deposit) : null;
  }

  await new Promise<void>((resolve) =>
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve),
  );
  const address = server.address() as AddressInfo;
  return {
    url: `http://${address.address}:${address.port}`,
    async close() {
      shutdown.abort();
      for (const timer of timers) clearTimeout(timer);
      for (const socket of hanging) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The records whose time is in [from, to) (ISO instants in the query), oldest first then by id,
 * one page of `offset`/`limit` (at most 100). A missing or unreadable bound is open.
 */
function inWindow<T extends { id: string }>(
  records: readonly T[],
  timeOf: (record: T) => string,
  query: URLSearchParams,
): T[] {
  const bound = (name: string, open: number): number => {
    const at = Date.parse(query.get(name) ?? '');
    return Number.isNaN(at) ? open : at;
  };
  const from = bound('from', Number.NEGATIVE_INFINITY);
  const to = bound('to', Number.POSITIVE_INFINITY);
  const offset = Math.max(Number(query.get('offset') ?? 0) || 0, 0);
  const limit = Math.min(Math.max(Number(query.get('limit') ?? 100) || 100, 1), 100);
  return records
    .filter((r) => Date.parse(timeOf(r)) >= from && Date.parse(timeOf(r)) < to)
    .sort((a, b) => Date.parse(timeOf(a)) - Date.parse(timeOf(b)) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .slice(offset, offset + limit);
}

async function readJson(
  request: IncomingMessage,
  response: ServerResponse,
  bytesMax = requestBodyBytesMax,
): Promise<unknown | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > bytesMax) {
      sendJson(response, 413, { error: 'payload_too_large' });
      return undefined;
    }
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    sendJson(response, 400, { error: 'invalid_json' });
    return undefined;
  }
}

function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}
