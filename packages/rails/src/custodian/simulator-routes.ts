/** The simulator's routes: the custodian's /v1 API and the test-only /_control, /_seed, /_ledger. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import {
  type CreateTransferBody,
  type CustodianTransfer,
  controlBodySchema,
  createTransferBodySchema,
  type Ledger,
  type SubmitFault,
  seedBodySchema,
  submitFaultSchema,
} from './protocol.ts';
import { type CustodianBooks, transfersMax } from './simulator-books.ts';
import { inWindow, readJson, sendJson } from './simulator-http.ts';

export const faultHeader = 'x-simulator-fault';

const seedBodyBytesMax = 4 * 1024 * 1024;

/** What a route needs: the books, the API key (if any), and where hung sockets are kept for close(). */
export interface Simulator {
  books: CustodianBooks;
  apiKey?: string;
  hanging: Set<Socket>;
}

export async function route(
  sim: Simulator,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://simulator');
  const path = url.pathname;
  const { books } = sim;
  if (path.startsWith('/v1/') && sim.apiKey && request.headers.authorization !== `Bearer ${sim.apiKey}`) {
    sendJson(response, 401, { error: 'unauthorized' });
    return;
  }
  if (request.method === 'POST' && path === '/v1/transfers') return createTransfer(sim, request, response);
  if (request.method === 'GET' && path === '/v1/deposits') {
    sendJson(response, 200, { data: inWindow(books.deposits, (d) => d.confirmedAt, url.searchParams) });
    return;
  }
  if (request.method === 'GET' && path === '/v1/transfers') return listTransfers(books, url, response);
  if (request.method === 'GET' && path === '/v1/balances') {
    const assets = new Set([...books.holdings.keys(), ...books.misreports.keys()]);
    const data = [...assets].sort().map((asset) => ({
      asset,
      amountMinor: ((books.holdings.get(asset) ?? 0n) + (books.misreports.get(asset) ?? 0n)).toString(),
    }));
    sendJson(response, 200, { asOf: new Date().toISOString(), data });
    return;
  }
  const depositId = /^\/v1\/deposits\/([\w-]{1,128})$/.exec(path);
  if (request.method === 'GET' && depositId) {
    const deposit = books.deposits.find((d) => d.id === depositId[1]);
    if (deposit) sendJson(response, 200, deposit);
    else sendJson(response, 404, { error: 'not_found' });
    return;
  }
  const byId = /^\/v1\/transfers\/([\w-]{1,128})$/.exec(path);
  if (request.method === 'GET' && byId) {
    const transfer = books.transfers.find((t) => t.id === byId[1]);
    if (transfer) sendJson(response, 200, transfer);
    else sendJson(response, 404, { error: 'not_found' });
    return;
  }
  if (request.method === 'POST' && path === '/_control') return control(books, request, response);
  if (request.method === 'POST' && path === '/_seed') return seed(books, request, response);
  if (request.method === 'GET' && path === '/_ledger') {
    const countsByReference: Record<string, number> = {};
    for (const t of books.transfers)
      countsByReference[t.externalReference] = (countsByReference[t.externalReference] ?? 0) + 1;
    const ledger: Ledger = {
      transfers: books.transfers,
      deposits: books.deposits,
      countsByReference,
      webhookDeliveries: books.outbox.deliveries,
    };
    sendJson(response, 200, ledger);
    return;
  }
  sendJson(response, 404, { error: 'no_such_route' });
}

/** By reference, by time window, or the whole account a page at a time. */
function listTransfers(books: CustodianBooks, url: URL, response: ServerResponse): void {
  const { transfers } = books;
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
}

async function control(books: CustodianBooks, request: IncomingMessage, response: ServerResponse) {
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
  const deposit = books.applyControl(parsed.data);
  sendJson(response, 200, { ok: true, ...(deposit ? { deposit } : {}) });
}

async function seed(books: CustodianBooks, request: IncomingMessage, response: ServerResponse) {
  const { transfers } = books;
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
}

function samePayload(transfer: CustodianTransfer, body: CreateTransferBody): boolean {
  return (
    transfer.asset === body.asset &&
    transfer.amountMinor === body.amountMinor &&
    transfer.destination === body.destination &&
    transfer.memo === body.memo
  );
}

/** The fault the request names in its header, else the configured one. */
function nextFault(books: CustodianBooks, request: IncomingMessage): SubmitFault | { invalid: string } {
  const header = request.headers[faultHeader];
  if (typeof header === 'string') {
    const parsed = submitFaultSchema.safeParse(header);
    return parsed.success ? parsed.data : { invalid: header };
  }
  return books.takeFault();
}

async function createTransfer(
  sim: Simulator,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const { books } = sim;
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
  const fault = nextFault(books, request);
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
  const existing = books.existing(input.externalReference);
  if (existing) {
    if (!samePayload(existing, input)) {
      sendJson(response, 409, { error: 'reference_conflict', id: existing.id });
      return;
    }
    transfer = existing;
    replayed = true;
  } else {
    if (books.transfers.length >= transfersMax) {
      sendJson(response, 507, { error: 'ledger_full' });
      return;
    }
    transfer = books.book(input);
  }
  answerWithFault(sim, fault, transfer, replayed, request, response);
}

/** The answer to a submission the books now hold, as the fault plays it. */
function answerWithFault(
  sim: Simulator,
  fault: Exclude<SubmitFault, 'reject'>,
  transfer: CustodianTransfer,
  replayed: boolean,
  request: IncomingMessage,
  response: ServerResponse,
): void {
  switch (fault) {
    case 'none':
      sendJson(response, replayed ? 200 : 201, transfer, replayed ? { 'idempotent-replayed': 'true' } : {});
      return;
    case 'accept-then-timeout':
      // The transfer exists; the answer never comes. close() releases the socket.
      sim.hanging.add(request.socket);
      request.socket.once('close', () => sim.hanging.delete(request.socket));
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
