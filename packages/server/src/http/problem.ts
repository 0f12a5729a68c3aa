import type { ServerResponse } from 'node:http';
import { type ErrorCode, errorStatus, IdemError } from '@idem/contracts';
import { toProblem } from '../errors.ts';

/** Answers a non-tRPC route with an RFC 9457 problem document, status from the one table. */
export function sendProblem(
  res: ServerResponse,
  requestId: string,
  code: ErrorCode,
  detail: string,
  status = errorStatus[code],
  headers: Record<string, string> = {},
): void {
  const problem = { ...toProblem(new IdemError(code, detail), requestId), status };
  res.writeHead(status, { 'content-type': 'application/problem+json', ...headers });
  res.end(JSON.stringify(problem));
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}
