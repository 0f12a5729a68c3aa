/**
 * Our side of a REST custodian: submit a transfer under our external reference, look it up by that
 * reference, verify status webhooks. Every submit answer is classified into a closed set:
 *
 * - acknowledged: the provider echoed our reference, or gave a durable id that a lookup resolved to
 *   a transfer carrying our reference (C16). Only this counts as "the custodian has it".
 * - rejected: the provider answered that it created nothing (a clean 4xx refusal).
 * - ambiguous: anything else (timeout, reset, 5xx, a 2xx without our reference, a malformed body,
 *   a conflict over our reference). The transfer may exist: mark UNKNOWN, keep the hold, and call
 *   `lookupByReference` before any resend (C13, C14).
 */
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { z } from 'zod';
import {
  type AccountBalances,
  accountBalancesSchema,
  type CreateTransferBody,
  type CustodianDeposit,
  type CustodianTransfer,
  createTransferBodySchema,
  custodianDepositSchema,
  custodianTransferSchema,
  depositListSchema,
  type TimeWindow,
  transferListSchema,
  webhookEnvelopeSchema,
  webhookEventTypes,
} from './protocol.ts';

export interface CustodianAdapterConfig {
  baseUrl: string;
  apiKey?: string;
  /** Deadline of each HTTP call. Default 5,000 ms. */
  timeoutMs?: number;
}

export type SubmitAmbiguity =
  | 'timeout'
  | 'connection'
  | 'http_status'
  | 'no_reference'
  | 'unresolved_provider_id'
  | 'malformed_response'
  | 'reference_conflict';

export type SubmitOutcome =
  | {
      readonly outcome: 'acknowledged';
      readonly transfer: CustodianTransfer;
      /** How the acknowledgment was proven: our reference echoed, or the provider id resolved. */
      readonly via: 'reference' | 'provider_id';
      /** The provider returned an existing transfer for our reference (a retry, not a new transfer). */
      readonly replayed: boolean;
    }
  | { readonly outcome: 'rejected'; readonly status: number; readonly reason: string }
  | { readonly outcome: 'ambiguous'; readonly reason: SubmitAmbiguity; readonly detail: string };

/**
 * What the custodian holds under our reference. `many` means the provider made more than one
 * transfer for one reference: never guess which counts; escalate.
 */
export type ReferenceLookup =
  | { readonly found: 'none' }
  | { readonly found: 'one'; readonly transfer: CustodianTransfer }
  | { readonly found: 'many'; readonly transfers: readonly CustodianTransfer[] };

export interface CustodianAdapter {
  submit(
    request: CreateTransferBody,
    options?: { signal?: AbortSignal; timeoutMs?: number },
  ): Promise<SubmitOutcome>;
  /** Throws when the custodian cannot be asked: no answer is no evidence, so the caller stays UNKNOWN. */
  lookupByReference(externalReference: string, options?: { signal?: AbortSignal }): Promise<ReferenceLookup>;
  /**
   * Every transfer on the account, read page by page along the provider's cursor (reconciliation).
   * Never a silent part: throws CustodianListIncompleteError when the account holds more than
   * `max` transfers or the provider pages without a cursor.
   */
  listTransfers(options?: { max?: number }): Promise<CustodianTransfer[]>;
  /**
   * What the account holds per asset, as of the provider's report time (balance reconciliation).
   * Throws when the custodian cannot be asked or answers malformed: no figure is no evidence.
   */
  balances(): Promise<AccountBalances>;
  /**
   * Deposits confirmed in the window, every page (missed-event recovery). Throws when the custodian
   * cannot be asked or the window holds more than `windowRecordsMax`: narrow the window, never
   * read part of it as all of it.
   */
  depositsBetween(window: TimeWindow): Promise<CustodianDeposit[]>;
  /**
   * The custodian's own record of one deposit, by its id; null when the custodian answers that it
   * has none. Throws when the custodian cannot be asked: no answer is no evidence either way.
   */
  depositById(id: string, options?: { signal?: AbortSignal }): Promise<CustodianDeposit | null>;
  /** Transfers whose status changed in the window, every page; throws like `depositsBetween`. */
  transfersUpdatedBetween(window: TimeWindow): Promise<CustodianTransfer[]>;
}

/** Thrown when the custodian's books cannot be read completely: a partial list proves nothing. */
export class CustodianListIncompleteError extends Error {
  override readonly name = 'CustodianListIncompleteError';
}

/** The most records one window read returns before it refuses (100 pages). */
export const windowRecordsMax = 10_000;

const timeoutMsDefault = 5_000;
const listPageSize = 100;
/** The most transfers one listing reads (memory bound); above it reconciliation fails loudly. */
export const transfersListedMax = 1_000_000;
const responseBodyBytesMax = 256 * 1024;
const detailLengthMax = 300;

class ResponseTooLargeError extends Error {}

export function createCustodianAdapter(config: CustodianAdapterConfig): CustodianAdapter {
  const call = callerOf(config);
  return {
    submit: (request, options) => submit(call, request, options),
    lookupByReference: (externalReference, options) => lookupByReference(call, externalReference, options),
    listTransfers: (options) => listTransfers(call, options),
    balances: () => balances(call),
    depositsBetween: (window: TimeWindow) =>
      readWindow(call, '/v1/deposits', window, (json) => depositListSchema.parse(json).data),
    depositById: (id, options) => depositById(call, id, options),
    transfersUpdatedBetween: (window: TimeWindow) =>
      readWindow(call, '/v1/transfers', window, (json) => transferListSchema.parse(json).data),
  };
}

/** One HTTP call to the custodian within its deadline, the body read up to its bound. */
type Call = (
  path: string,
  init: { method: 'GET' | 'POST'; body?: string; signal?: AbortSignal; timeoutMs?: number },
) => Promise<{ status: number; text: string; replayed: boolean }>;

function callerOf(config: CustodianAdapterConfig): Call {
  const baseUrl = config.baseUrl.replace(/\/+$/, '');
  const timeoutMsDefaultForAdapter = config.timeoutMs ?? timeoutMsDefault;
  return async (path, init) => {
    const signals = [AbortSignal.timeout(init.timeoutMs ?? timeoutMsDefaultForAdapter)];
    if (init.signal) signals.push(init.signal);
    const response = await fetch(`${baseUrl}${path}`, {
      method: init.method,
      headers: {
        accept: 'application/json',
        ...(init.body ? { 'content-type': 'application/json' } : {}),
        ...(config.apiKey ? { authorization: `Bearer ${config.apiKey}` } : {}),
      },
      body: init.body ?? null,
      signal: AbortSignal.any(signals),
    });
    return {
      status: response.status,
      text: await readLimited(response),
      replayed: response.headers.get('idempotent-replayed') === 'true',
    };
  };
}

async function lookupByReference(
  call: Call,
  externalReference: string,
  options: { signal?: AbortSignal } = {},
): Promise<ReferenceLookup> {
  const { status, text } = await call(
    `/v1/transfers?externalReference=${encodeURIComponent(externalReference)}`,
    {
      method: 'GET',
      ...(options.signal ? { signal: options.signal } : {}),
    },
  );
  if (status !== 200) throw new Error(`custodian lookup answered HTTP ${status}`);
  const list = transferListSchema.parse(JSON.parse(text)).data.filter(
    // A provider that ignored our filter must not make someone else's transfer ours.
    (t) => t.externalReference === externalReference,
  );
  const [first] = list;
  if (!first) return { found: 'none' };
  if (list.length === 1) return { found: 'one', transfer: first };
  return { found: 'many', transfers: list };
}

async function depositById(
  call: Call,
  id: string,
  options: { signal?: AbortSignal } = {},
): Promise<CustodianDeposit | null> {
  const { status, text } = await call(`/v1/deposits/${encodeURIComponent(id)}`, {
    method: 'GET',
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (status === 404) return null;
  if (status !== 200) throw new Error(`custodian deposit lookup answered HTTP ${status}`);
  const deposit = custodianDepositSchema.parse(JSON.parse(text));
  // A provider that answered another record must not make it the one we asked about.
  if (deposit.id !== id) throw new Error('custodian deposit lookup answered another deposit');
  return deposit;
}

async function listTransfers(call: Call, options: { max?: number } = {}): Promise<CustodianTransfer[]> {
  const max = Math.min(Math.max(options.max ?? transfersListedMax, 1), transfersListedMax);
  const all: CustodianTransfer[] = [];
  const cursors = new Set<string>();
  let cursor: string | null = null;
  for (;;) {
    const query: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
    const { status, text } = await call(`/v1/transfers?limit=${listPageSize}${query}`, { method: 'GET' });
    if (status !== 200) throw new Error(`custodian list answered HTTP ${status}`);
    const page = transferListSchema.parse(JSON.parse(text));
    all.push(...page.data);
    if (all.length > max) {
      throw new CustodianListIncompleteError(`the custodian holds more than ${max} transfers`);
    }
    if (page.nextCursor === undefined && page.data.length === listPageSize) {
      throw new CustodianListIncompleteError('a full page of transfers came without a cursor');
    }
    if (page.nextCursor === undefined || page.nextCursor === null) return all;
    if (cursors.has(page.nextCursor)) {
      throw new CustodianListIncompleteError('the custodian repeated a cursor');
    }
    cursors.add(page.nextCursor);
    cursor = page.nextCursor;
  }
}

async function balances(call: Call): Promise<AccountBalances> {
  const { status, text } = await call('/v1/balances', { method: 'GET' });
  if (status !== 200) throw new Error(`custodian balances answered HTTP ${status}`);
  return accountBalancesSchema.parse(JSON.parse(text));
}

/** Reads every page of a time-window listing, oldest first, or throws. */
async function readWindow<T>(
  call: Call,
  path: string,
  window: TimeWindow,
  parse: (json: unknown) => T[],
): Promise<T[]> {
  if (!(window.from < window.to)) return [];
  const range = `from=${encodeURIComponent(window.from.toISOString())}&to=${encodeURIComponent(window.to.toISOString())}`;
  const all: T[] = [];
  for (;;) {
    const { status, text } = await call(`${path}?${range}&offset=${all.length}&limit=100`, {
      method: 'GET',
    });
    if (status !== 200) throw new Error(`custodian ${path} answered HTTP ${status}`);
    const page = parse(JSON.parse(text));
    all.push(...page);
    if (page.length < 100) return all;
    if (all.length >= windowRecordsMax) {
      throw new Error(`custodian ${path} holds over ${windowRecordsMax} records in one window`);
    }
  }
}

async function resolveProviderId(
  call: Call,
  id: string,
  reference: string,
): Promise<CustodianTransfer | null> {
  try {
    const { status, text } = await call(`/v1/transfers/${encodeURIComponent(id)}`, { method: 'GET' });
    if (status !== 200) return null;
    const parsed = custodianTransferSchema.safeParse(JSON.parse(text));
    return parsed.success && parsed.data.id === id && parsed.data.externalReference === reference
      ? parsed.data
      : null;
  } catch {
    return null;
  }
}

async function submit(
  call: Call,
  request: CreateTransferBody,
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<SubmitOutcome> {
  // Our own input is checked before anything leaves: a malformed request is a bug, not an outcome.
  const body = createTransferBodySchema.parse(request);
  let answer: { status: number; text: string; replayed: boolean };
  try {
    answer = await call('/v1/transfers', {
      method: 'POST',
      body: JSON.stringify(body),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    });
  } catch (error) {
    return { outcome: 'ambiguous', ...readTransportError(error) };
  }
  const { status, text } = answer;

  if (status >= 200 && status < 300) return acknowledgement(call, status, text, body, answer.replayed);
  // 409 on our reference means a transfer with it exists (with other terms): never "nothing happened".
  // 408 is the provider's own timeout: it may have processed the request.
  if (status === 409) return ambiguous('reference_conflict', truncate(text));
  if (status >= 400 && status < 500 && status !== 408) {
    const reason = z.object({ reason: z.string() }).safeParse(safeJson(text));
    return {
      outcome: 'rejected',
      status,
      reason: reason.success ? truncate(reason.data.reason) : truncate(text),
    };
  }
  return ambiguous('http_status', `HTTP ${status}`);
}

/**
 * A 2xx answer proves the transfer only with our reference echoed, or a provider id that a lookup
 * resolves to our reference (C16); anything else is ambiguous.
 */
async function acknowledgement(
  call: Call,
  status: number,
  text: string,
  body: CreateTransferBody,
  replayed: boolean,
): Promise<SubmitOutcome> {
  const json = safeJson(text);
  const transfer = custodianTransferSchema.safeParse(json);
  if (transfer.success && transfer.data.externalReference === body.externalReference) {
    if (!sameTerms(transfer.data, body)) {
      return ambiguous('reference_conflict', 'the acknowledged transfer carries other terms than we sent');
    }
    return {
      outcome: 'acknowledged',
      transfer: transfer.data,
      via: 'reference',
      replayed,
    };
  }
  const providerId = z.object({ id: z.string().min(1).max(128) }).safeParse(json);
  if (providerId.success) {
    const resolved = await resolveProviderId(call, providerId.data.id, body.externalReference);
    if (resolved && sameTerms(resolved, body)) {
      return { outcome: 'acknowledged', transfer: resolved, via: 'provider_id', replayed: false };
    }
    return ambiguous(
      'unresolved_provider_id',
      `provider id ${providerId.data.id} did not resolve to our reference`,
    );
  }
  return json === undefined
    ? ambiguous('malformed_response', `HTTP ${status} with a body that is not JSON`)
    : ambiguous('no_reference', `HTTP ${status} without our reference or a provider id`);
}

function sameTerms(transfer: CustodianTransfer, body: CreateTransferBody): boolean {
  return (
    transfer.asset === body.asset &&
    transfer.amountMinor === body.amountMinor &&
    transfer.destination === body.destination &&
    (transfer.memo ?? undefined) === (body.memo ?? undefined)
  );
}

function ambiguous(reason: SubmitAmbiguity, detail: string): SubmitOutcome {
  return { outcome: 'ambiguous', reason, detail };
}

function readTransportError(error: unknown): { reason: SubmitAmbiguity; detail: string } {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) {
    return { reason: 'timeout', detail: 'no answer before the deadline or the caller aborted' };
  }
  if (error instanceof ResponseTooLargeError) return { reason: 'malformed_response', detail: error.message };
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : undefined;
  const code = (cause as { code?: unknown } | undefined)?.code;
  return {
    reason: 'connection',
    detail: truncate(`${String(error)}${typeof code === 'string' ? ` (${code})` : ''}`),
  };
}

async function readLimited(response: Response): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > responseBodyBytesMax) {
      await reader.cancel();
      throw new ResponseTooLargeError(`response body over ${responseBodyBytesMax} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function truncate(text: string): string {
  return text.length > detailLengthMax ? `${text.slice(0, detailLengthMax)}…` : text;
}

// --- Webhooks (receiving side) ------------------------------------------------------------

export type VerifiedWebhook = {
  /** The sender's event id (`webhook-id`): the inbox deduplication key. */
  readonly webhookId: string;
  readonly timestamp: Date;
  readonly type: string;
  readonly occurredAt: string;
  /** The transfer, for known event types whose data parses; null for unknown types (store UNHANDLED, C19). */
  readonly transfer: CustodianTransfer | null;
};

export class WebhookRejectedError extends Error {
  override readonly name = 'WebhookRejectedError';
}

const webhookBodyBytesMax = 256 * 1024;

/**
 * Verifies a Standard Webhooks signature over the raw body before anything is parsed (C20), then
 * parses the envelope. Throws WebhookRejectedError on a bad or missing signature, a stale or
 * future timestamp (standardwebhooks allows 5 minutes), an oversized body, or a malformed envelope:
 * answer 4xx and keep only minimal metadata.
 */
export function verifyWebhook(
  rawBody: string | Buffer,
  headers: Record<string, string | string[] | undefined>,
  secret: string,
): VerifiedWebhook {
  if (Buffer.byteLength(rawBody) > webhookBodyBytesMax)
    throw new WebhookRejectedError('webhook body too large');
  const pick = (name: string): string => {
    const value = headers[name] ?? headers[name.toLowerCase()];
    const single = Array.isArray(value) ? value[0] : value;
    if (typeof single !== 'string' || single.length === 0 || single.length > 1024) {
      throw new WebhookRejectedError(`missing or oversized ${name} header`);
    }
    return single;
  };
  const signed = {
    'webhook-id': pick('webhook-id'),
    'webhook-timestamp': pick('webhook-timestamp'),
    'webhook-signature': pick('webhook-signature'),
  };
  let payload: unknown;
  try {
    payload = new Webhook(secret).verify(rawBody, signed);
  } catch (error) {
    if (error instanceof WebhookVerificationError)
      throw new WebhookRejectedError(`signature: ${error.message}`);
    throw new WebhookRejectedError('unverifiable webhook body');
  }
  const envelope = webhookEnvelopeSchema.safeParse(payload);
  if (!envelope.success) throw new WebhookRejectedError('webhook envelope malformed');
  const known = (webhookEventTypes as readonly string[]).includes(envelope.data.type);
  const transfer = known ? custodianTransferSchema.safeParse(envelope.data.data) : null;
  if (transfer && !transfer.success) throw new WebhookRejectedError('webhook data malformed for its type');
  return {
    webhookId: signed['webhook-id'],
    timestamp: new Date(Number(signed['webhook-timestamp']) * 1000),
    type: envelope.data.type,
    occurredAt: envelope.data.occurredAt,
    transfer: transfer?.data ?? null,
  };
}
