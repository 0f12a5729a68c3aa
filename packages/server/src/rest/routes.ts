import {
  type ApiKeyScope,
  createCustomerSessionInputSchema,
  createCustomerSessionOutputSchema,
  type ErrorCode,
  errorStatus,
  getBalancesOutputSchema,
  type IdemError,
  idempotencyKeySchema,
  listAssetsOutputSchema,
  listDepositsInputSchema,
  listDepositsOutputSchema,
  listWithdrawalsInputSchema,
  listWithdrawalsOutputSchema,
  operationViewSchema,
  previewWithdrawalInputSchema,
  previewWithdrawalOutputSchema,
  referenceSchema,
  submitWithdrawalOutputSchema,
  submitWithdrawalsInputSchema,
  submitWithdrawalsOutputSchema,
  WITHDRAWAL_BATCH_BODY_LIMIT_BYTES,
  withdrawalRequestSchema,
} from '@idem/contracts';
import type { z } from 'zod';

/** What the REST handler hands a route to build its procedure's input. */
export interface RestRequest {
  params: Record<string, string>;
  query: URLSearchParams;
  /** The parsed JSON body (undefined for a GET). */
  body: unknown;
}

/** A success answer's status and extra headers, from the procedure's result. */
export interface RestSuccess {
  status: number;
  headers?: Record<string, string>;
}

/**
 * One REST route: the tRPC procedure it runs (the same middleware, zod schemas and core function
 * as the tRPC face), how the HTTP request becomes that procedure's input, and what the OpenAPI
 * document says about it. The handler (handler.ts) and the document (openapi.ts) both read this
 * table, so a route cannot be served without being documented, or documented without being served.
 */
export interface RestRoute {
  operationId: string;
  method: 'GET' | 'POST';
  /** An OpenAPI path template: `{name}` is one path segment. */
  path: string;
  procedure: string;
  /** The API key scope the procedure requires (its `apiProcedure(scope)`); a key without it is 403. */
  scope: ApiKeyScope;
  summary: string;
  description: string;
  tag: 'Withdrawals' | 'Accounts' | 'Deposits' | 'Customer sessions';
  pathParams?: Record<string, z.ZodType>;
  /** A strict object of query parameters, the procedure's own input schema. */
  query?: z.ZodObject;
  /** The request body, as documented (the procedure's input schema validates it again). */
  requestBody?: { schema: z.ZodType; id: string };
  /** The `Idempotency-Key` header is required (IETF draft-ietf-httpapi-idempotency-key-header). */
  idempotencyKeyHeader?: boolean;
  /** A body limit above the server's IDEM_BODY_LIMIT_BYTES (the bulk submission's). */
  bodyLimitBytes?: number;
  /** Documented success answers by status. */
  successes: Record<number, { description: string; schema: z.ZodType; headers?: string[] }>;
  /** Refusals this route can answer, beyond the ones every tenant route can (401, 429, 500). */
  refusals: ErrorCode[];
  /** What a refusal status means on this route, where the document's general wording does not fit. */
  refusalDescriptions?: Partial<Record<number, string>>;
  input(request: RestRequest): unknown;
  success(result: unknown): RestSuccess;
}

const key = (value: string | undefined) => value ?? '';

/** Query strings carry text; a page size is a number, and a non-number is left for zod to refuse. */
function queryInput(query: URLSearchParams, numeric: string[] = []): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const [name, value] of query) {
    input[name] = numeric.includes(name) && /^[0-9]{1,9}$/.test(value) ? Number(value) : value;
  }
  return input;
}

const ok: RestSuccess = { status: 200 };

export const restRoutes: RestRoute[] = [
  {
    operationId: 'submitWithdrawal',
    method: 'POST',
    path: '/v1/withdrawals',
    procedure: 'withdrawals.submit',
    scope: 'withdraw',
    tag: 'Withdrawals',
    summary: 'Submit a withdrawal',
    description:
      'Creates the withdrawal, or answers with the one this Idempotency-Key already created. Send the same key on every retry of one withdrawal (`withdrawal-<your id>`): 201 the first time, 200 with `Idempotent-Replayed: true` afterwards. The key bound to a different payload is 422; a second key for a withdrawal id another key holds is 409 and names `holderKey`; while the outcome is UNKNOWN the answer is 409 IN_FLIGHT with `Retry-After`. A withdrawal rejected for insufficient funds keeps that outcome: every replay is the same 422.',
    requestBody: { schema: withdrawalRequestSchema, id: 'WithdrawalRequest' },
    idempotencyKeyHeader: true,
    successes: {
      201: {
        description: 'Created: a new withdrawal, held and REQUESTED.',
        schema: submitWithdrawalOutputSchema,
        headers: ['Location'],
      },
      200: {
        description: 'Replayed: what this key created before; nothing new was written.',
        schema: submitWithdrawalOutputSchema,
        headers: ['Idempotent-Replayed', 'Location'],
      },
    },
    refusals: ['VALIDATION', 'IDEMPOTENCY_CONFLICT', 'IN_FLIGHT', 'INSUFFICIENT_FUNDS', 'PAYLOAD_TOO_LARGE'],
    input: ({ body }) => {
      // A key in the body too is allowed if it agrees with the header (the procedure checks).
      if (typeof body === 'object' && body !== null && !Array.isArray(body) && 'idempotencyKey' in body) {
        const { idempotencyKey, ...request } = body as Record<string, unknown>;
        return { request, idempotencyKey };
      }
      return { request: body };
    },
    success: (result): RestSuccess => {
      const { outcome, withdrawal } = result as z.infer<typeof submitWithdrawalOutputSchema>;
      const location = `/v1/withdrawals/${encodeURIComponent(withdrawal.reference)}`;
      return outcome === 'CREATED'
        ? { status: 201, headers: { location } }
        : { status: 200, headers: { location, 'idempotent-replayed': 'true' } };
    },
  },
  {
    operationId: 'submitWithdrawalBatch',
    method: 'POST',
    path: '/v1/withdrawal-batches',
    procedure: 'withdrawals.submitMany',
    scope: 'withdraw',
    tag: 'Withdrawals',
    summary: 'Submit up to 1,000 withdrawals at once',
    description:
      'Each item is a withdrawal with its own `idempotencyKey` (the same key you would send in the `Idempotency-Key` header of `POST /v1/withdrawals`), answered in `results` in the order of `items`: `{outcome, withdrawal}` as that call would answer it (CREATED or REPLAYED), or `{error}` with the code it would refuse with (VALIDATION, IDEMPOTENCY_CONFLICT with `holderKey` for a withdrawal id another key holds, IN_FLIGHT with `retryAfterMs`, INSUFFICIENT_FUNDS, which that key keeps). One item’s refusal writes nothing for it and never fails the others. The batch itself has no key and no `Idempotency-Key` header is read: retrying the whole batch after a lost answer or a 503 is safe, since every item replays by its key. The answer is 200 whenever the items were answered, whatever each came to (not 207 Multi-Status, a WebDAV status whose body is XML); 400 when the batch itself is malformed (not an object with 1 to 1,000 `items`, nothing written); 503 when the database was out of reach for every item. A batch costs one rate-limit token per item.',
    requestBody: { schema: submitWithdrawalsInputSchema, id: 'WithdrawalBatchRequest' },
    bodyLimitBytes: WITHDRAWAL_BATCH_BODY_LIMIT_BYTES,
    successes: {
      200: {
        description: 'One result per item, in order: each CREATED, REPLAYED or refused on its own.',
        schema: submitWithdrawalsOutputSchema,
      },
    },
    refusals: ['VALIDATION', 'PAYLOAD_TOO_LARGE'],
    refusalDescriptions: {
      400: 'VALIDATION: the batch itself is malformed (not JSON, not an object with 1 to 1,000 `items`). Nothing was written. A malformed item is that item’s result, not a 400.',
      503: 'UNAVAILABLE: the database was out of reach for every item; no outcome is known. Retry the same batch after `Retry-After`: every item replays by its key.',
    },
    input: ({ body }) => body,
    success: () => ok,
  },
  {
    operationId: 'previewWithdrawal',
    method: 'POST',
    path: '/v1/withdrawals/preview',
    procedure: 'withdrawals.preview',
    scope: 'withdraw',
    tag: 'Withdrawals',
    summary: 'Preview a withdrawal (dry run)',
    description:
      'What the policy would decide for this withdrawal if it were submitted now: `ALLOW` (approved by the policy alone), `REVIEW` with `approvalsRequired` staff approvals, or `DENY` with its code in `reasons` (INSUFFICIENT_FUNDS); the rules that matched, the available balance and the balance after the hold, whether a freeze would hold it, and `alreadySubmitted` when its withdrawal id (or the key, if you send one in the body) is taken. The request is validated exactly as `POST /v1/withdrawals` validates it. Nothing is written: the key and the withdrawal id stay free, and the answer is not a reservation (a submission a moment later is judged anew).',
    requestBody: { schema: previewWithdrawalInputSchema, id: 'PreviewWithdrawalRequest' },
    successes: {
      200: { description: 'The decision; nothing was written.', schema: previewWithdrawalOutputSchema },
    },
    refusals: ['VALIDATION'],
    input: ({ body }) => body,
    success: () => ok,
  },
  {
    operationId: 'listWithdrawals',
    method: 'GET',
    path: '/v1/withdrawals',
    procedure: 'withdrawals.list',
    scope: 'read',
    tag: 'Withdrawals',
    summary: 'List withdrawals',
    description:
      'Newest first, optionally in one state. Pass `nextCursor` back as `cursor` for the next page.',
    query: listWithdrawalsInputSchema,
    successes: { 200: { description: 'A page of withdrawals.', schema: listWithdrawalsOutputSchema } },
    refusals: ['VALIDATION'],
    input: ({ query }) => queryInput(query, ['limit']),
    success: () => ok,
  },
  {
    operationId: 'getWithdrawal',
    method: 'GET',
    path: '/v1/withdrawals/{withdrawalId}',
    procedure: 'withdrawals.get',
    scope: 'read',
    tag: 'Withdrawals',
    summary: 'Get a withdrawal by your withdrawal id',
    description:
      'Its state and where the money went: `txHash` for a chain Idem signs for, or `custodianTransferId` and `custodianTxHash` for a custodian-routed one. Another tenant’s withdrawal is 404, like a missing one.',
    pathParams: { withdrawalId: referenceSchema },
    successes: { 200: { description: 'The withdrawal.', schema: operationViewSchema } },
    refusals: ['VALIDATION', 'NOT_FOUND'],
    input: ({ params }) => ({ withdrawalId: key(params.withdrawalId) }),
    success: () => ok,
  },
  {
    operationId: 'getIdempotencyKey',
    method: 'GET',
    path: '/v1/idempotency-keys/{key}',
    procedure: 'withdrawals.getByKey',
    scope: 'read',
    tag: 'Withdrawals',
    summary: 'What an idempotency key holds',
    description:
      'The withdrawal this key created, or 404: a key never used, refused because another key holds the withdrawal id, expired by retention, or another tenant’s. After a 409 naming `holderKey`, this tells you what that key produced.',
    pathParams: { key: idempotencyKeySchema },
    successes: { 200: { description: 'The withdrawal the key created.', schema: operationViewSchema } },
    refusals: ['VALIDATION', 'NOT_FOUND'],
    input: ({ params }) => ({ idempotencyKey: key(params.key) }),
    success: () => ok,
  },
  {
    operationId: 'getBalances',
    method: 'GET',
    path: '/v1/accounts/{accountId}/balances',
    procedure: 'balances.get',
    scope: 'read',
    tag: 'Accounts',
    summary: 'An account’s balances',
    description:
      'Available and held amounts per asset, in minor units; empty for an account with no entries.',
    pathParams: { accountId: referenceSchema },
    successes: { 200: { description: 'Balances per asset.', schema: getBalancesOutputSchema } },
    refusals: ['VALIDATION'],
    input: ({ params }) => ({ accountId: key(params.accountId) }),
    success: () => ok,
  },
  {
    operationId: 'listAssets',
    method: 'GET',
    path: '/v1/assets',
    procedure: 'assets.list',
    scope: 'read',
    tag: 'Accounts',
    summary: 'The assets this tenant has configured',
    description: 'Each asset’s network, decimals (minor units) and confirmation depth.',
    successes: { 200: { description: 'The assets, by code.', schema: listAssetsOutputSchema } },
    refusals: [],
    input: () => undefined,
    success: () => ok,
  },
  {
    operationId: 'listDeposits',
    method: 'GET',
    path: '/v1/deposits',
    procedure: 'deposits.list',
    scope: 'read',
    tag: 'Deposits',
    summary: 'List deposits',
    description: 'Credited (and reversed) deposits, newest first; one account’s with `accountId`.',
    query: listDepositsInputSchema,
    successes: { 200: { description: 'A page of deposits.', schema: listDepositsOutputSchema } },
    refusals: ['VALIDATION'],
    input: ({ query }) => queryInput(query, ['limit']),
    success: () => ok,
  },
  {
    operationId: 'createCustomerSession',
    method: 'POST',
    path: '/v1/customer-sessions',
    procedure: 'customerSessions.create',
    scope: 'customer-sessions',
    tag: 'Customer sessions',
    summary: 'A one-time link to the customer screens',
    description:
      'Opens a short-lived session for one account when the customer follows it (once). A retry may mint a second link; the unused one expires.',
    requestBody: { schema: createCustomerSessionInputSchema, id: 'CustomerSessionRequest' },
    successes: { 201: { description: 'The link.', schema: createCustomerSessionOutputSchema } },
    refusals: ['VALIDATION', 'PAYLOAD_TOO_LARGE'],
    input: ({ body }) => body,
    success: () => ({ status: 201 }),
  },
];

/** Refusals any tenant route can answer. */
export const commonRefusals: ErrorCode[] = [
  'UNAUTHORIZED',
  'FORBIDDEN',
  'RATE_LIMITED',
  'INTERNAL',
  'UNAVAILABLE',
];

/**
 * The status of a refusal on the REST face: the one table (errorStatus), except that a key reused
 * with another payload is 422, as the IETF Idempotency-Key draft and Stripe answer it, while a
 * second key for a held withdrawal id stays 409 with `holderKey`. The tRPC face keeps 409 for both;
 * the code (IDEMPOTENCY_CONFLICT) is the same on both faces.
 */
export function restStatus(route: RestRoute, error: IdemError): number {
  if (route.idempotencyKeyHeader && error.code === 'IDEMPOTENCY_CONFLICT' && !error.details.holderKey) {
    return 422;
  }
  return errorStatus[error.code];
}

/** Every refusal status a route can answer, for its document. */
export function refusalStatuses(route: RestRoute): number[] {
  const statuses = new Set([...route.refusals, ...commonRefusals].map((code) => errorStatus[code]));
  if (route.idempotencyKeyHeader && route.refusals.includes('IDEMPOTENCY_CONFLICT')) statuses.add(422);
  return [...statuses].sort((x, y) => x - y);
}
