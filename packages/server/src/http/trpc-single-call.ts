import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type AnyTRPCProcedure,
  type AnyTRPCRouter,
  getTRPCErrorFromUnknown,
  getTRPCErrorShape,
  TRPCError,
  transformTRPCResponse,
} from '@trpc/server';
import { getHTTPStatusCodeFromError } from '@trpc/server/http';
import { BodyTooLargeError, readBody } from './body.ts';

export interface SingleCallOptions<TContext> {
  router: AnyTRPCRouter;
  /** Where the procedures are mounted, e.g. `/trpc/`. */
  basePath: string;
  maxBodySize: number;
  /** Procedures whose bodies may be larger than `maxBodySize` (the bulk submission), by path. */
  maxBodySizeByPath?: Record<string, number>;
  createContext(req: IncomingMessage, res: ServerResponse): TContext;
  onError(opts: { error: TRPCError; path: string; req: IncomingMessage }): void;
}

/**
 * The tRPC wire protocol for the one request shape the SDK sends to money-moving procedures: a
 * single (unbatched) mutation, POSTed as JSON with no query string. It runs the same procedure
 * (middleware, input and output schemas, error formatter) as tRPC's own Node adapter, without that
 * adapter's Fetch API layer (a Request, a ReadableStream, AbortSignals and a Response per call):
 * on 2 cores the HTTP bench went from 1,600-1,790 to 2,400-2,600 submissions/s. Anything else (batches,
 * queries, other content types, unknown paths) returns null and goes to tRPC's adapter unchanged.
 */
export function createSingleCallHandler<TContext>(options: SingleCallOptions<TContext>) {
  const config = options.router._def._config;
  const procedures = options.router._def.procedures as Record<string, AnyTRPCProcedure | undefined>;

  /** The call's answer, or null when the request is not a single JSON mutation (tRPC's adapter's turn). */
  return function handleSingleCall(req: IncomingMessage, res: ServerResponse): Promise<void> | null {
    const url = req.url ?? '';
    // A query string means a batch (`?batch=1`) or another tRPC feature: tRPC's adapter decides.
    if (req.method !== 'POST' || !url.startsWith(options.basePath) || url.includes('?')) return null;
    if (!isJson(req.headers['content-type'])) return null;
    const path = url.slice(options.basePath.length);
    const procedure = Object.hasOwn(procedures, path) ? procedures[path] : undefined;
    if (procedure?._def.type !== 'mutation') return null;
    return respond(req, res, path, procedure);
  };

  async function respond(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    procedure: AnyTRPCProcedure,
  ): Promise<void> {
    let ctx: TContext | undefined;
    let input: unknown;
    let rawInput: Promise<unknown> | undefined;
    let body: unknown;
    try {
      ctx = options.createContext(req, res);
      const data = await procedure({
        path,
        ctx,
        type: 'mutation',
        // No procedure reads one: a submission is one SQL statement, which a departed client must
        // not cut short anyway (its outcome is what the retry with the same key asks for).
        signal: undefined,
        batchIndex: 0,
        // Read once and kept: the body is a stream, and besides the input parser the staff
        // middleware reads it again to record what was asked in the audit log (a second read of
        // the ended stream answered undefined, and every audit entry's details were empty).
        getRawInput: () => {
          const limit = options.maxBodySizeByPath?.[path] ?? options.maxBodySize;
          rawInput ??= readJsonInput(req, limit, config.transformer.input.deserialize).then((value) => {
            input = value;
            return value;
          });
          return rawInput;
        },
      });
      if (isStream(data)) {
        // As tRPC's adapter: streamed results need a streaming link.
        throw new TRPCError({
          code: 'UNSUPPORTED_MEDIA_TYPE',
          message: 'a stream needs httpBatchStreamLink',
        });
      }
      body = { result: { data } };
    } catch (cause) {
      const error = getTRPCErrorFromUnknown(cause);
      options.onError({ error, path, req });
      const shape = getTRPCErrorShape({ config, ctx, error, input, path, type: 'mutation' });
      const status = (shape.data as { httpStatus?: unknown }).httpStatus;
      res.statusCode = typeof status === 'number' ? status : getHTTPStatusCodeFromError(error);
      const retryAfter = retryAfterSeconds([shape]);
      if (retryAfter) res.setHeader('retry-after', retryAfter);
      body = { error: shape };
    }
    res.setHeader('vary', 'trpc-accept, accept');
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(transformTRPCResponse(config, body as never)));
  }
}

async function readJsonInput(
  req: IncomingMessage,
  limit: number,
  deserialize: (value: unknown) => unknown,
): Promise<unknown> {
  try {
    const raw = await readBody(req, limit);
    // As tRPC's JSON handler: an empty body is no input.
    return raw.length === 0 ? undefined : deserialize(JSON.parse(raw.toString('utf8')));
  } catch (cause) {
    if (cause instanceof BodyTooLargeError) throw new TRPCError({ code: 'PAYLOAD_TOO_LARGE' });
    // As tRPC's adapter: an unreadable or malformed body is the caller's error, never a 500.
    throw new TRPCError({
      code: 'BAD_REQUEST',
      message: cause instanceof Error ? cause.message : 'Invalid input',
      cause,
    });
  }
}

/**
 * The Retry-After header (whole seconds, at least 1) for answers whose errors carry retryAfterMs
 * (RATE_LIMITED, IN_FLIGHT), so clients and proxies that read only HTTP wait too.
 */
export function retryAfterSeconds(errorShapes: unknown[]): string | null {
  let ms = 0;
  for (const shape of errorShapes) {
    const data = (shape as { data?: { retryAfterMs?: unknown } } | null)?.data;
    if (typeof data?.retryAfterMs === 'number') ms = Math.max(ms, data.retryAfterMs);
  }
  return ms > 0 ? String(Math.max(1, Math.ceil(ms / 1000))) : null;
}

function isJson(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const semicolon = contentType.indexOf(';');
  return (
    (semicolon < 0 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase() ===
    'application/json'
  );
}

function isStream(data: unknown): boolean {
  return (
    typeof data === 'object' &&
    data !== null &&
    (Symbol.asyncIterator in data || data instanceof ReadableStream)
  );
}
