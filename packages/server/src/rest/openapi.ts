import {
  createCustomerSessionOutputSchema,
  errorCodes,
  getBalancesOutputSchema,
  IDEMPOTENCY_KEY_LENGTH_MAX,
  listAssetsOutputSchema,
  operationPageSchema,
  operationViewSchema,
  operationWebhookSchema,
  previewWithdrawalOutputSchema,
  problemSchema,
  submitWithdrawalOutputSchema,
  submitWithdrawalsOutputSchema,
  withdrawalBatchItemErrorSchema,
  withdrawalBatchItemSchema,
  withdrawalBatchResultSchema,
} from '@idem/contracts';
import { z } from 'zod';
import { type RestRoute, refusalStatuses, restRoutes } from './routes.ts';

/**
 * The OpenAPI 3.1 document of the REST face, generated from the route table (routes.ts) and the
 * contracts' zod schemas through zod's own JSON Schema output (2020-12, OpenAPI 3.1's dialect):
 * one source for each schema, the one the server validates with. Served at /openapi.json.
 */
export function openApiDocument(options: { serverUrl?: string } = {}): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of restRoutes) {
    paths[route.path] = { ...paths[route.path], [route.method.toLowerCase()]: operationOf(route) };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Idem API',
      version: '1.0.0',
      summary: 'Move money exactly once: withdrawals with idempotency keys, balances, deposits.',
      description: [
        'Every money-moving request carries an `Idempotency-Key`; retry with the same key and Idem answers with what that key already did. Amounts are integers in minor units, sent as strings. Errors are RFC 9457 problem documents (`application/problem+json`) with a stable `code` and the `requestId` to quote to support (also the `X-Request-Id` header).',
        '',
        'Error codes:',
        ...Object.entries(errorCodes).map(([code, why]) => `- \`${code}\`: ${why}`),
      ].join('\n'),
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: options.serverUrl ?? '/', description: 'This server' }],
    security: [{ apiKey: [] }],
    tags: [
      { name: 'Withdrawals', description: 'Submit, replay and read withdrawals.' },
      { name: 'Accounts', description: 'Balances and assets.' },
      { name: 'Deposits', description: 'Credited deposits.' },
      { name: 'Customer sessions', description: 'Links to the customer screens.' },
    ],
    paths,
    webhooks: {
      'operation.state_changed': {
        post: {
          operationId: 'operationStateChanged',
          summary: 'An operation changed state',
          description:
            'Sent to each of your endpoints on every state change, signed with Standard Webhooks. Verify the signature over the raw body with your endpoint secret, reject timestamps more than 5 minutes off, and deduplicate on `webhook-id`: a notification may arrive more than once. Never carries the destination or memo.',
          tags: ['Withdrawals'],
          security: [],
          parameters: [
            webhookHeader('webhook-id', 'The notification id; the same on every redelivery.'),
            webhookHeader('webhook-timestamp', 'Seconds since the Unix epoch when it was signed.'),
            webhookHeader(
              'webhook-signature',
              'Space-separated `v1,<base64 HMAC-SHA256>` signatures of `id.timestamp.body`.',
            ),
          ],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: ref('OperationWebhook') } },
          },
          responses: {
            '200': { description: 'Received; any 2xx counts.' },
            default: { description: 'Anything else is retried with backoff, then dead-lettered.' },
          },
        },
      },
    },
    components: {
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description:
            'Your tenant API key (the staff API keys screen, or `pnpm idem apikey create --tenant <id>`). A key carries scopes (`withdraw`, `customer-sessions`, `read`, `webhooks`); each operation names the one it needs (`x-idem-scope`). A key may expire.',
        },
      },
      schemas: componentSchemas(),
      headers: {
        'Idempotent-Replayed': {
          description: '`true` when the answer is the stored outcome of an earlier request with this key.',
          required: true,
          schema: { type: 'string', const: 'true' },
        },
        Location: {
          description: 'Where to read this withdrawal.',
          required: true,
          schema: { type: 'string' },
        },
        'Retry-After': {
          description: 'Whole seconds to wait before retrying with the same key.',
          required: true,
          schema: { type: 'string', pattern: '^[0-9]+$' },
        },
        'X-Request-Id': {
          description: 'This request’s id, also in a problem’s `requestId`.',
          schema: { type: 'string' },
        },
      },
    },
  };
}

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

function webhookHeader(name: string, description: string) {
  return { name, in: 'header', required: true, description, schema: { type: 'string' } };
}

/** The named schemas: each registered once and referenced everywhere (zod writes the $refs). */
const outputs = z.registry<{ id: string }>();
outputs.add(operationViewSchema, { id: 'Operation' });
outputs.add(submitWithdrawalOutputSchema, { id: 'SubmitWithdrawalResult' });
outputs.add(previewWithdrawalOutputSchema, { id: 'WithdrawalPreview' });
outputs.add(withdrawalBatchItemErrorSchema, { id: 'WithdrawalBatchItemError' });
outputs.add(withdrawalBatchResultSchema, { id: 'WithdrawalBatchItemResult' });
outputs.add(submitWithdrawalsOutputSchema, { id: 'WithdrawalBatchResult' });
outputs.add(operationPageSchema, { id: 'OperationPage' });
outputs.add(getBalancesOutputSchema, { id: 'Balances' });
outputs.add(listAssetsOutputSchema, { id: 'Assets' });
outputs.add(createCustomerSessionOutputSchema, { id: 'CustomerSession' });
outputs.add(problemSchema, { id: 'Problem' });
outputs.add(operationWebhookSchema, { id: 'OperationWebhook' });
const inputs = z.registry<{ id: string }>();
inputs.add(withdrawalBatchItemSchema, { id: 'WithdrawalBatchItem' });
for (const route of restRoutes) {
  if (route.requestBody && !inputs.has(route.requestBody.schema)) {
    inputs.add(route.requestBody.schema, { id: route.requestBody.id });
  }
}

function componentSchemas(): Record<string, unknown> {
  return { ...jsonSchemas(inputs, 'input'), ...jsonSchemas(outputs, 'output') };
}

function jsonSchemas(registry: z.core.$ZodRegistry<{ id: string }>, io: 'input' | 'output') {
  const { schemas } = z.toJSONSchema(registry, {
    io,
    target: 'draft-2020-12',
    uri: (id) => `#/components/schemas/${id}`,
    unrepresentable: 'any',
  }) as { schemas: Record<string, Record<string, unknown>> };
  // Inside one OpenAPI document a component needs neither its own dialect nor its own id.
  return Object.fromEntries(
    Object.entries(schemas).map(([id, { $schema: _dialect, $id: _id, ...schema }]) => [id, schema]),
  );
}

function inline(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, {
    io,
    target: 'draft-2020-12',
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  return json;
}

/** A success answer's component; a route whose schema has no name fails the document, not a client. */
function successSchema(route: RestRoute, schema: z.ZodType) {
  const id = outputs.get(schema)?.id;
  if (!id)
    throw new Error(`REST route ${route.operationId} answers with a schema that has no component name`);
  return ref(id);
}

function operationOf(route: RestRoute): Record<string, unknown> {
  const parameters: Record<string, unknown>[] = [];
  for (const [name, schema] of Object.entries(route.pathParams ?? {})) {
    parameters.push({ name, in: 'path', required: true, schema: inline(schema, 'input') });
  }
  if (route.query) {
    for (const [name, field] of Object.entries(route.query.shape)) {
      const schema = field as z.ZodType;
      parameters.push({
        name,
        in: 'query',
        required: !schema.safeParse(undefined).success,
        schema: inline(schema, 'input'),
      });
    }
  }
  if (route.idempotencyKeyHeader) {
    parameters.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: true,
      description:
        'One key per withdrawal, the same on every retry: `withdrawal-<your withdrawal id>`. Printable ASCII, no spaces, not an e-mail address. A key also sent in the body as `idempotencyKey` must be the same.',
      schema: {
        type: 'string',
        minLength: 1,
        maxLength: IDEMPOTENCY_KEY_LENGTH_MAX,
        pattern: '^[\\x21-\\x7e]+$',
      },
    });
  }
  const responses: Record<string, unknown> = {};
  for (const [status, success] of Object.entries(route.successes)) {
    responses[status] = {
      description: success.description,
      headers: Object.fromEntries(
        (success.headers ?? []).map((name) => [name, { $ref: `#/components/headers/${name}` }]),
      ),
      content: { 'application/json': { schema: successSchema(route, success.schema) } },
    };
  }
  for (const status of refusalStatuses(route)) {
    responses[String(status)] = {
      description: refusalDescription(route, status),
      headers: {
        'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
        ...(status === 409 || status === 429 || status === 503
          ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } }
          : {}),
      },
      content: { 'application/problem+json': { schema: ref('Problem') } },
    };
  }
  return {
    operationId: route.operationId,
    summary: route.summary,
    description: `${route.description}\n\nRequires an API key with the \`${route.scope}\` scope.`,
    'x-idem-scope': route.scope,
    tags: [route.tag],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.requestBody
      ? {
          requestBody: {
            required: true,
            content: { 'application/json': { schema: ref(route.requestBody.id) } },
          },
        }
      : {}),
    responses,
  };
}

function refusalDescription(route: RestRoute, status: number): string {
  const own = route.refusalDescriptions?.[status];
  if (own) return own;
  const byStatus: Record<number, string> = {
    400: route.idempotencyKeyHeader
      ? 'VALIDATION: the body or the Idempotency-Key header is missing or malformed. Nothing was written.'
      : 'VALIDATION: a parameter is malformed.',
    401: 'UNAUTHORIZED: the API key is missing, unknown, revoked or expired.',
    403: `FORBIDDEN: the API key lacks the \`${route.scope}\` scope (\`missingScope\` names it). Nothing was read or written.`,
    404: 'NOT_FOUND: no such object for this tenant (another tenant’s objects too).',
    409: route.idempotencyKeyHeader
      ? 'IDEMPOTENCY_CONFLICT: the withdrawal id is held by another key (`holderKey` names it); or IN_FLIGHT: the outcome is not known yet, retry with the same key after `Retry-After`.'
      : 'Conflict.',
    413: 'PAYLOAD_TOO_LARGE: the body is over the size limit.',
    422: route.idempotencyKeyHeader
      ? 'IDEMPOTENCY_CONFLICT: this key was used with a different payload; or INSUFFICIENT_FUNDS, the stored outcome of this key, on every replay.'
      : 'Unprocessable.',
    429: 'RATE_LIMITED: too many requests for this tenant; retry after `Retry-After`.',
    500: 'INTERNAL: an unexpected fault. For a submission the outcome is unknown: retry with the same key.',
    503: 'UNAVAILABLE: the database is out of reach for now (a failover, a lost connection). For a submission the outcome is unknown: retry with the same key after `Retry-After`.',
  };
  return byStatus[status] ?? 'Refused.';
}
