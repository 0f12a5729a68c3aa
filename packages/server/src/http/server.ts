import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { reportKeySchema, scrubMessage, WITHDRAWAL_BATCH_BODY_LIMIT_BYTES } from '@idem/contracts';
import type { Database, EgressPolicy } from '@idem/core';
import { BROADCAST_ALERT_AFTER_MS } from '@idem/workers';
import type { TRPCError } from '@trpc/server';
import { createHTTPHandler } from '@trpc/server/adapters/standalone';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { ApiKeyCache } from '../auth/api-key-cache.ts';
import { PasswordCheckCap } from '../auth/sign-in-throttle.ts';
import type { MfaKeyRing } from '../auth/totp-secrets.ts';
import { webRequestOf } from '../auth/web-request.ts';
import type { Env } from '../env.ts';
import type { Metrics } from '../metrics.ts';
import { RateLimiter } from '../rate-limit.ts';
import type { BalanceReconciler } from '../reconciler.ts';
import { serveDocs } from '../rest/docs.ts';
import { createRestHandler, restRouteOf } from '../rest/handler.ts';
import { openApiDocument } from '../rest/openapi.ts';
import { appRouter } from '../router.ts';
import type { SettlementWitness } from '../settlement-witness.ts';
import type { Context, RequestState } from '../trpc.ts';
import { clientAddressOf } from './client-address.ts';
import { sendJson, sendProblem } from './problem.ts';
import { createSingleCallHandler, retryAfterSeconds } from './trpc-single-call.ts';
import { serveWebApp } from './web-app.ts';
import { handleWebhook } from './webhooks.ts';

export interface ServerDeps {
  db: Database;
  env: Env;
  log: Logger;
  metrics: Metrics;
  /** The rails' answer for manual resolutions (see settlement-witness.ts). */
  witness?: SettlementWitness;
  /** Balance reconciliation on demand (see reconciler.ts). */
  reconciler?: BalanceReconciler;
  /** Development defaults (env.ts isDevelopment): plain cookie names, no Secure. */
  development: boolean;
  /** The keys that seal staff TOTP secrets (auth/totp-secrets.ts); null: TOTP is refused. */
  mfaKeys: MfaKeyRing | null;
  /** The bearer token /metrics asks for; null: no metrics are served (404). */
  metricsToken: string | null;
  /** Where outbound webhook endpoints may point (env.ts egressPolicyFrom). */
  egress: EgressPolicy;
}

interface RequestInfo {
  requestId: string;
  state: RequestState;
}

/** Procedure names, so the latency metric's route label stays a closed set. */
const PROCEDURES = new Set([
  'withdrawals.submit',
  'withdrawals.submitMany',
  'withdrawals.get',
  'withdrawals.list',
  'withdrawals.getByKey',
  'deposits.list',
  'balances.get',
  'assets.list',
]);
const REQUEST_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
const WEBHOOK_PATH = /^\/webhooks\/([^/]{1,100})$/;

/**
 * One port for everything: `/trpc`, the REST face under `/v1` with `/openapi.json` and `/docs`,
 * `/webhooks/:endpointId`, `/healthz`, `/readyz`, `/metrics`.
 * Each request gets a request id (the caller's `X-Request-Id` when it is well-formed), sent back
 * as `X-Request-Id`, put in the error's `data.requestId` and in the access log.
 */
export function createIdemServer(deps: ServerDeps): Server {
  const { log } = deps;
  const info = new WeakMap<IncomingMessage, RequestInfo>();
  const handlers = handlersOf(deps, info);
  return createServer((req, res) => {
    const started = process.hrtime.bigint();
    const incoming = single(req.headers['x-request-id']);
    const requestId = incoming && REQUEST_ID_PATTERN.test(incoming) ? incoming : randomUUID();
    const state: RequestState = {};
    info.set(req, { requestId, state });
    res.setHeader('x-request-id', requestId);
    const url = new URL(req.url ?? '/', 'http://localhost');
    const route = routeOf(req.method, url.pathname);
    res.on('finish', () => logAccess(deps, req, res, { route, requestId, state, started }));
    dispatch(deps, handlers, req, res, url, route, requestId).catch((error: unknown) => {
      log.error({ requestId, err: scrubMessage(String(error)) }, 'request failed');
      if (!res.headersSent) sendProblem(res, requestId, 'INTERNAL', 'an unexpected error occurred');
      else res.destroy();
    });
  });
}

/** The handlers built once per server: tRPC (batched and single calls), REST, and the OpenAPI document. */
interface Handlers {
  trpc: ReturnType<typeof createHTTPHandler>;
  singleCall: ReturnType<typeof createSingleCallHandler>;
  rest: ReturnType<typeof createRestHandler>;
  openApiJson: string;
  metricsAuth: ((token: string | null) => boolean) | null;
}

function handlersOf(deps: ServerDeps, info: WeakMap<IncomingMessage, RequestInfo>): Handlers {
  const { env, log } = deps;
  const createContext = contextFactory(deps, info);
  const onError = ({
    error,
    path,
    req,
  }: {
    error: TRPCError;
    path: string | undefined;
    req: IncomingMessage;
  }) => {
    const request = info.get(req);
    if (error.code === 'INTERNAL_SERVER_ERROR' && !isIdemCause(error.cause)) {
      log.error(
        { requestId: request?.requestId, path, err: scrubMessage(String(error.cause ?? error)) },
        'procedure failed',
      );
    }
  };
  const trpc = createHTTPHandler({
    router: appRouter,
    basePath: '/trpc/',
    maxBodySize: env.IDEM_BODY_LIMIT_BYTES,
    createContext: ({ req, res }) => createContext(req, res),
    onError,
    responseMeta: ({ data }) => {
      const retryAfter = retryAfterSeconds(
        data.map((response) => ('error' in response ? response.error : null)),
      );
      return retryAfter ? { headers: { 'retry-after': retryAfter } } : {};
    },
  });
  const singleCall = createSingleCallHandler({
    router: appRouter,
    basePath: '/trpc/',
    maxBodySize: env.IDEM_BODY_LIMIT_BYTES,
    // A bulk submission of 1,000 items is larger than any other request (sent unbatched, as the SDK does).
    maxBodySizeByPath: {
      'withdrawals.submitMany': Math.max(env.IDEM_BODY_LIMIT_BYTES, WITHDRAWAL_BATCH_BODY_LIMIT_BYTES),
    },
    createContext,
    onError,
  });
  const rest = createRestHandler({
    router: appRouter,
    maxBodySize: env.IDEM_BODY_LIMIT_BYTES,
    createContext,
    onError: ({ error, path, req }) => onError({ error: error as TRPCError, path, req }),
  });
  return {
    trpc,
    singleCall,
    rest,
    // Built once: it depends on nothing but the code.
    openApiJson: JSON.stringify(openApiDocument()),
    metricsAuth: deps.metricsToken === null ? null : bearerCheck(deps.metricsToken),
  };
}

/** Each request's context, from the server's shared limits and caches and the request itself. */
function contextFactory(deps: ServerDeps, info: WeakMap<IncomingMessage, RequestInfo>) {
  const { db, env, log } = deps;
  const rateLimiter = new RateLimiter(env.IDEM_RATE_LIMIT_PER_SECOND);
  const apiKeyCache = new ApiKeyCache(env.IDEM_API_KEY_CACHE_MS);
  const passwordChecks = new PasswordCheckCap(env.IDEM_PASSWORD_CHECKS_MAX);
  const secureCookies =
    env.IDEM_COOKIE_SECURE ?? (!deps.development || env.IDEM_PUBLIC_URL?.startsWith('https://') === true);
  const broadcastAlertAfterMs = { ...BROADCAST_ALERT_AFTER_MS, ...env.IDEM_BROADCAST_ALERT_AFTER_MS };
  return (req: IncomingMessage, res: ServerResponse): Context => {
    const request = info.get(req) ?? { requestId: randomUUID(), state: {} };
    return {
      db,
      log,
      rateLimiter,
      apiKeyCache,
      passwordChecks,
      mfaKeys: deps.mfaKeys,
      ...(env.IDEM_MFA_FRESH_SECONDS_MAX === undefined
        ? {}
        : { mfaFreshSecondsMax: env.IDEM_MFA_FRESH_SECONDS_MAX }),
      clientAddress: clientAddressOf(req, env.IDEM_TRUSTED_PROXY_HOPS),
      requestId: request.requestId,
      apiKey: bearer(req.headers.authorization),
      idempotencyKeyHeader: single(req.headers['idempotency-key']),
      state: request.state,
      exposeStacks: env.NODE_ENV === 'development',
      web: webRequestOf(req, res, {
        secureCookies,
        publicUrl: env.IDEM_PUBLIC_URL,
        development: deps.development,
      }),
      ...(deps.witness ? { witness: deps.witness } : {}),
      ...(deps.reconciler ? { reconciler: deps.reconciler } : {}),
      broadcastAlertAfterMs,
      egress: deps.egress,
      ...(env.IDEM_SIGNER_URL && env.IDEM_SIGNER_TOKEN
        ? { signerService: { url: env.IDEM_SIGNER_URL, token: env.IDEM_SIGNER_TOKEN } }
        : {}),
    };
  };
}

/** The latency metric and the access log line, once the answer is sent. */
function logAccess(
  { metrics, log }: ServerDeps,
  req: IncomingMessage,
  res: ServerResponse,
  {
    route,
    requestId,
    state,
    started,
  }: { route: string; requestId: string; state: RequestState; started: bigint },
): void {
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  metrics.requestDuration.observe({ route, status: String(res.statusCode) }, seconds);
  // Access log: no query string, no headers, no body; the tenant, never the credential (C23).
  log.info(
    {
      requestId,
      method: req.method,
      route,
      status: res.statusCode,
      durationMs: Math.round(seconds * 1e4) / 10,
      tenantId: state.tenantId,
      errorCode: state.errorCode,
      procedure: state.procedure,
      // CREATED / REPLAYED, or the refusal's code; with the operation id, never the key (C23).
      outcome: state.errorCode ?? state.outcome,
      operationId: state.operationId,
      // A bulk submission: how many items came to each outcome (no keys, no destinations).
      outcomes: state.outcomes,
    },
    'request',
  );
}

async function dispatch(
  deps: ServerDeps,
  handlers: Handlers,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  route: string,
  requestId: string,
): Promise<void> {
  const { db, env, metrics } = deps;
  if (route.startsWith('trpc')) {
    const answered = handlers.singleCall(req, res);
    if (answered) return answered;
    handlers.trpc(req, res);
    return;
  }
  if (route.startsWith('rest')) {
    const answered = handlers.rest(req, res, url);
    if (answered) return answered;
  }
  if (route === 'openapi' && (req.method === 'GET' || req.method === 'HEAD')) {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache' });
    res.end(req.method === 'HEAD' ? undefined : handlers.openApiJson);
    return;
  }
  if (route === 'docs' && req.method === 'GET' && (await serveDocs(url.pathname, res))) return;
  if (route === 'webhooks') {
    if (req.method !== 'POST') return sendProblem(res, requestId, 'VALIDATION', 'webhooks are POSTed');
    const endpointId = WEBHOOK_PATH.exec(url.pathname)?.[1] ?? '';
    await handleWebhook(req, res, decodeURIComponent(endpointId), requestId, deps);
    return;
  }
  if (route === 'healthz') return sendJson(res, 200, { status: 'ok' });
  if (route === 'report-key') return publishReportKey(res, requestId, deps.env);
  if (route === 'readyz') {
    const ready = await databaseReady(db);
    return sendJson(res, ready ? 200 : 503, { status: ready ? 'ready' : 'database unavailable' });
  }
  if (route === 'metrics') {
    // Not on the public side of the house: a cross-tenant aggregate, for the operator's scraper.
    const { metricsAuth } = handlers;
    if (!metricsAuth) return sendProblem(res, requestId, 'NOT_FOUND', 'no such route');
    if (!metricsAuth(bearer(req.headers.authorization))) {
      return sendProblem(
        res,
        requestId,
        'UNAUTHORIZED',
        'the metrics bearer token is missing or wrong',
        401,
        {
          'www-authenticate': 'Bearer',
        },
      );
    }
    res.writeHead(200, { 'content-type': metrics.registry.contentType });
    res.end(await metrics.registry.metrics());
    return;
  }
  if (await serveWebApp(req, res, url.pathname, env.IDEM_WEB_DIST)) return;
  sendProblem(res, requestId, 'NOT_FOUND', 'no such route');
}

function routeOf(method: string | undefined, pathname: string): string {
  if (pathname.startsWith('/trpc/')) {
    const procedure = pathname.slice('/trpc/'.length);
    return PROCEDURES.has(procedure) ? `trpc:${procedure}` : 'trpc:other';
  }
  if (pathname.startsWith('/v1/')) {
    const rest = restRouteOf(method, pathname);
    return rest ? `rest:${rest.procedure}` : 'rest:other';
  }
  if (pathname === '/openapi.json') return 'openapi';
  if (pathname === '/docs' || pathname.startsWith('/docs/')) return 'docs';
  if (WEBHOOK_PATH.test(pathname)) return 'webhooks';
  if (pathname === '/healthz' || pathname === '/readyz' || pathname === '/metrics') return pathname.slice(1);
  if (pathname === '/report-key.json') return 'report-key';
  return 'other';
}

async function databaseReady(db: Database): Promise<boolean> {
  const timeout = new Promise<false>((resolve) => setTimeout(() => resolve(false), 2_000).unref());
  const check = db.execute(sql`select 1`).then(
    () => true,
    () => false,
  );
  return Promise.race([check, timeout]);
}

/** Compares a presented token with the expected one in constant time (hashes have equal lengths). */
function bearerCheck(expected: string): (presented: string | null) => boolean {
  const want = createHash('sha256').update(expected, 'utf8').digest();
  return (presented) =>
    presented !== null && timingSafeEqual(createHash('sha256').update(presented, 'utf8').digest(), want);
}

function bearer(header: string | undefined): string | null {
  const match = /^Bearer\s+(\S+)$/i.exec(header ?? '');
  return match?.[1] ?? null;
}

function single(value: string | string[] | undefined): string | null {
  return (Array.isArray(value) ? value[0] : value) ?? null;
}

function isIdemCause(cause: unknown): boolean {
  return cause instanceof Error && cause.name === 'IdemError';
}

/**
 * The public half of the signer service's report key (I32-SIGNER), which signs reconciliation
 * reports: auditors verify a report with it (`idem reconcile verify --public-key`). Asked of the
 * service at each request; 404 where no signer service is configured.
 */
async function publishReportKey(res: ServerResponse, requestId: string, env: Env): Promise<void> {
  if (!env.IDEM_SIGNER_URL)
    return sendProblem(res, requestId, 'NOT_FOUND', 'no signer service is configured');
  try {
    const response = await fetch(new URL('/v1/report-key', env.IDEM_SIGNER_URL), {
      signal: AbortSignal.timeout(5_000),
    });
    const key = reportKeySchema.parse(await response.json());
    return sendJson(res, 200, key);
  } catch {
    return sendProblem(
      res,
      requestId,
      'SIGNER_UNAVAILABLE',
      'the signer service did not give its report key',
    );
  }
}
