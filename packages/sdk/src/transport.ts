import type { httpLink } from '@trpc/client';
import { Agent, request } from 'undici';

/** What tRPC's link accepts as `fetch`. */
export type LinkFetch = NonNullable<Parameters<typeof httpLink>[0]['fetch']>;

/**
 * The SDK's default transport on Node: undici's `request` over one keep-alive connection pool per
 * client. It skips the WHATWG Request/Response and stream objects that `fetch` builds for every
 * call, which cost an integrator's process more CPU per withdrawal than the rest of the SDK
 * together (measured by the server bench). Timeouts stay the SDK's own (`requestTimeoutMs`,
 * through the signal); undici's are turned off so there is exactly one.
 */
export function undiciTransport(options: { connections?: number } = {}): LinkFetch {
  const dispatcher = new Agent({
    connections: options.connections ?? 64,
    keepAliveTimeout: 4_000,
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  // tRPC's link reads nothing of the answer but `json()`; it sends a method, plain headers, a
  // string body and a signal.
  return async (url, init = {}) => {
    const response = await request(url.toString(), {
      dispatcher,
      method: (init.method ?? 'GET') as 'GET' | 'POST',
      headers: init.headers as Record<string, string> | undefined,
      body: typeof init.body === 'string' ? init.body : undefined,
      signal: init.signal ?? undefined,
    });
    return { json: () => response.body.json() } as Awaited<ReturnType<LinkFetch>>;
  };
}
