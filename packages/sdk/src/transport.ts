import { Agent, request } from 'undici';

/**
 * What the SDK needs of `fetch`: a method, plain headers, an optional string body and a signal in;
 * an answer with `json()` out. The global `fetch` qualifies.
 */
export type LinkFetch = (
  url: string,
  init: { method: 'GET' | 'POST'; headers: Record<string, string>; body?: string; signal: AbortSignal },
) => Promise<{ json(): Promise<unknown> }>;

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
  return async (url, init) => {
    const response = await request(url, {
      dispatcher,
      method: init.method,
      headers: init.headers,
      body: init.body,
      signal: init.signal,
    });
    return { json: () => response.body.json() };
  };
}
