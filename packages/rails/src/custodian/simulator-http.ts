/** The simulator's HTTP plumbing: bounded JSON bodies, JSON answers, and time-window pages. */
import type { IncomingMessage, ServerResponse } from 'node:http';

const requestBodyBytesMax = 64 * 1024;

/**
 * The records whose time is in [from, to) (ISO instants in the query), oldest first then by id,
 * one page of `offset`/`limit` (at most 100). A missing or unreadable bound is open.
 */
export function inWindow<T extends { id: string }>(
  records: readonly T[],
  timeOf: (record: T) => string,
  query: URLSearchParams,
): T[] {
  const bound = (name: string, open: number): number => {
    const at = Date.parse(query.get(name) ?? '');
    return Number.isNaN(at) ? open : at;
  };
  const from = bound('from', Number.NEGATIVE_INFINITY);
  const to = bound('to', Number.POSITIVE_INFINITY);
  const offset = Math.max(Number(query.get('offset') ?? 0) || 0, 0);
  const limit = Math.min(Math.max(Number(query.get('limit') ?? 100) || 100, 1), 100);
  return records
    .filter((r) => Date.parse(timeOf(r)) >= from && Date.parse(timeOf(r)) < to)
    .sort((a, b) => Date.parse(timeOf(a)) - Date.parse(timeOf(b)) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .slice(offset, offset + limit);
}

export async function readJson(
  request: IncomingMessage,
  response: ServerResponse,
  bytesMax = requestBodyBytesMax,
): Promise<unknown | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > bytesMax) {
      sendJson(response, 413, { error: 'payload_too_large' });
      return undefined;
    }
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    sendJson(response, 400, { error: 'invalid_json' });
    return undefined;
  }
}

export function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}
