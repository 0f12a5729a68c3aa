import type { IncomingMessage, ServerResponse } from 'node:http';
import { IdemError } from '@idem/contracts';
import { type AnyTRPCProcedure, type AnyTRPCRouter, getTRPCErrorFromUnknown } from '@trpc/server';
import { asIdemError, toProblem } from '../errors.ts';
import { BodyTooLargeError, readBody } from '../http/body.ts';
import type { Context } from '../trpc.ts';
import { type RestRoute, restRoutes, restStatus } from './routes.ts';

export interface RestHandlerOptions {
  router: AnyTRPCRouter;
  maxBodySize: number;
  createContext(req: IncomingMessage, res: ServerResponse): Context;
  /** Told of every failure, as tRPC's onError is (the server logs unexpected ones). */
  onError(opts: { error: unknown; path: string; req: IncomingMessage }): void;
}

interface CompiledRoute {
  route: RestRoute;
  pattern: RegExp;
  names: string[];
}

/** The route a request is for (the metrics and access-log label). */
export function restRouteOf(method: string | undefined, pathname: string): RestRoute | undefined {
  return compiled.find((entry) => entry.route.method === method && entry.pattern.test(pathname))?.route;
}

const compiled: CompiledRoute[] = restRoutes.map((route) => {
  const names: string[] = [];
  const source = route.path.replace(/\{([A-Za-z]+)\}/g, (_, name: string) => {
    names.push(name);
    return '([^/]+)';
  });
  return { route, pattern: new RegExp(`^${source}$`), names };
});

/**
 * The REST face under /v1: each route runs its tRPC procedure directly (as trpc-single-call.ts
 * does), so authentication, the tenant's rate limit, the input and output schemas and the core
 * function are the tRPC face's own; only the HTTP shape differs: statuses, headers and RFC 9457
 * problem documents. Returns null for a path that is not under /v1.
 */
export function createRestHandler(options: RestHandlerOptions) {
  const procedures = options.router._def.procedures as Record<string, AnyTRPCProcedure | undefined>;

  return function handleRest(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> | null {
    if (!url.pathname.startsWith('/v1/')) return null;
    const matches = compiled.filter((entry) => entry.pattern.test(url.pathname));
    const ctx = options.createContext(req, res);
    if (matches.length === 0) {
      return Promise.resolve(refuse(res, ctx, new IdemError('NOT_FOUND', 'no such route'), 404));
    }
    const match = matches.find((entry) => entry.route.method === req.method);
    if (!match) {
      const allow = matches.map((entry) => entry.route.method).join(', ');
      const error = new IdemError('VALIDATION', `this route answers ${allow}`);
      return Promise.resolve(refuse(res, ctx, error, 405, { allow }));
    }
    return answer(req, res, url, match, ctx);
  };

  async function answer(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    { route, pattern, names }: CompiledRoute,
    ctx: Context,
  ): Promise<void> {
    ctx.state.procedure = route.procedure;
    if (route.idempotencyKeyHeader) ctx.idempotencyKeyHeaderRequired = true;
    const procedure = procedures[route.procedure];
    if (!procedure) throw new Error(`REST route ${route.operationId} names no procedure ${route.procedure}`);
    try {
      const values = pattern.exec(url.pathname)?.slice(1) ?? [];
      const params = Object.fromEntries(names.map((name, index) => [name, decodeSegment(values[index])]));
      const data = await procedure({
        path: route.procedure,
        ctx,
        type: procedure._def.type,
        // As for a single tRPC call: a submission is one statement a departed client must not cut short.
        signal: undefined,
        batchIndex: 0,
        // Read only after the middleware authenticated the caller and took a rate-limit token.
        getRawInput: async () =>
          route.input({
            params,
            query: url.searchParams,
            body:
              route.method === 'POST'
                ? await readJson(req, Math.max(route.bodyLimitBytes ?? 0, options.maxBodySize))
                : undefined,
          }),
      });
      const success = route.success(data);
      res.writeHead(success.status, { 'content-type': 'application/json', ...success.headers });
      res.end(JSON.stringify(data));
    } catch (cause) {
      options.onError({ error: getTRPCErrorFromUnknown(cause), path: route.procedure, req });
      const error = asIdemError(cause);
      refuse(res, ctx, error, restStatus(route, error));
    }
  }
}

/** An RFC 9457 problem document with our code; Retry-After for the codes that say when (C05). */
function refuse(
  res: ServerResponse,
  ctx: Context,
  error: IdemError,
  status: number,
  headers: Record<string, string> = {},
): void {
  ctx.state.errorCode = error.code;
  const problem = { ...toProblem(error, ctx.requestId), status };
  const retryAfterMs = error.details.retryAfterMs;
  if (retryAfterMs !== undefined)
    headers['retry-after'] = String(Math.max(1, Math.ceil(retryAfterMs / 1000)));
  res.writeHead(status, { 'content-type': 'application/problem+json', ...headers });
  res.end(JSON.stringify(problem));
}

function decodeSegment(segment: string | undefined): string {
  try {
    return decodeURIComponent(segment ?? '');
  } catch {
    throw new IdemError('VALIDATION', 'a path segment is not valid percent-encoding');
  }
}

async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') {
    throw new IdemError('VALIDATION', 'send the body as JSON (Content-Type: application/json)');
  }
  let raw: Buffer;
  try {
    raw = await readBody(req, limit);
  } catch (cause) {
    if (cause instanceof BodyTooLargeError)
      throw new IdemError('PAYLOAD_TOO_LARGE', 'the body is over the limit');
    throw cause;
  }
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw new IdemError('VALIDATION', 'the body is not valid JSON');
  }
}
