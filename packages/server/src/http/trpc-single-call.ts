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
  maxBodySize: number;
  createContext(req: IncomingMessage, res: ServerResponse): TContext;
  onError(opts: { error: TRPCError; path: string; req: IncomingMessage }): void;
}

/**
 * The tRPC wire protocol for the one request shape the SDK sends to money-moving procedures: a
 * single (unbatched) mutation, POSTed as JSON with no query string. It runs the same procedure
 * (middleware, input and output schemas, error formatter) as tRPC's own Node adapter, without that
 * adapter's Fetch API layer (a Request, a ReadableStream, AbortSignals and a Response per call),
 * which cost the server about a fifth of its CPU per submission on 2 cores. Anything else (batches,
 * queries, other content types, unknown paths) returns false and goes to tRPC's adapter unchanged.
 */
export function createSingleCallHandler<TContext>(options: SingleCallOptions<TContext>) {
  const config = options.router._def._config;
  const procedures = options.router._def.procedures as Record<string, AnyTRPCProcedure | undefined>;

  return function handleSingleCall(req: IncomingMessage, res: ServerResponse, path: string): boolean {
    if (req.method !== 'POST' || !isJson(req.headers['content-type'])) return false;
    const procedure = Object.hasOwn(procedures, path) ? procedures[path] : undefined;
    if (!procedure || procedure._def.type !== 'mutation') return false;
    void respond(req, res, path, procedure);
    return true;
  };

  async function respond(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    procedure: AnyTRPCProcedure,
  ): Promise<void> {
    let ctx: TContext | undefined;
    let input: unknown;
    let body: unknown;
    try {
      ctx = options.createContext(req, res);
      const data = await procedure({
        path,
        ctx,
        type: 'mutation',
        signal: undefined,
        batchIndex: 0,
        getRawInput: async () => {
          input = await readJsonInput(req, options.maxBodySize, config.transformer.input.deserialize);
          return input;
        },
      });
      body = { result: { data } };
    } catch (cause) {
      const error = getTRPCErrorFromUnknown(cause);
      options.onError({ error, path, req });
      const shape = getTRPCErrorShape({ config, ctx, error, input, path, type: 'mutation' });
      const status = (shape.data as { httpStatus?: unknown }).httpStatus;
      res.statusCode = typeof status === 'number' ? status : getHTTPStatusCodeFromError(error);
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
  let raw: Buffer;
  try {
    raw = await readBody(req, limit);
  } catch (cause) {
    if (cause instanceof BodyTooLargeError) throw new TRPCError({ code: 'PAYLOAD_TOO_LARGE' });
    throw cause;
  }
  // As tRPC's JSON handler: an empty body is no input; malformed JSON fails the call.
  return raw.length === 0 ? undefined : deserialize(JSON.parse(raw.toString('utf8')));
}

function isJson(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const semicolon = contentType.indexOf(';');
  return (
    (semicolon < 0 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase() ===
    'application/json'
  );
}
