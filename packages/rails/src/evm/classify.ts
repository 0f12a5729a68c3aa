import { BaseError, HttpRequestError, RpcRequestError, TimeoutError } from 'viem';
import type { BroadcastAmbiguity, BroadcastRejection } from './types.ts';

/**
 * How a failed `eth_sendRawTransaction` is read. Only node answers we recognise as a clean refusal
 * count as rejected; everything else is ambiguous, because mistaking "maybe sent" for "not sent"
 * is how a payout goes out twice, while mistaking "not sent" for "maybe sent" only costs a lookup.
 */
export type BroadcastErrorReading =
  | { readonly kind: 'already_known'; readonly detail: string }
  | { readonly kind: 'nonce_too_low'; readonly detail: string }
  | { readonly kind: 'rejected'; readonly reason: BroadcastRejection; readonly detail: string }
  | { readonly kind: 'ambiguous'; readonly reason: BroadcastAmbiguity; readonly detail: string };

/** Messages of geth, anvil/reth, erigon, nethermind and besu for "I already have this transaction". */
const alreadyKnownPatterns = [
  /already known/i,
  /known transaction/i,
  /already imported/i,
  /already exists/i,
  /alreadyknown/i,
];
const nonceTooLowPatterns = [/nonce too low/i, /oldnonce/i, /nonce.*(is )?lower than/i];

/** Clean refusals: the node evaluated the bytes and will not pool them. Order matters: first match wins. */
const rejectionPatterns: readonly [RegExp, BroadcastRejection][] = [
  [/replacement transaction underpriced|replacement.*underpriced/i, 'nonce_in_use_pending'],
  [/insufficient funds/i, 'insufficient_funds'],
  [
    /underpriced|fee cap less than|max fee per gas less than|less than block base fee|priority fee/i,
    'fee_too_low',
  ],
  [/intrinsic gas too low|gas limit|exceeds block gas limit|out of gas/i, 'gas_limit'],
  [
    /invalid sender|invalid signature|chain id|rlp|exceeds the configured cap|nonce too high|nonce max/i,
    'invalid_transaction',
  ],
];

const messageLengthMax = 300;

export function readBroadcastError(error: unknown): BroadcastErrorReading {
  const rpc = findCause(error, RpcRequestError);
  // A JSON-RPC error inside a 5xx came from something that failed mid-request (often a proxy in
  // front of the node): we cannot tell whether the node itself took the transaction.
  if (rpc && (rpc.status === undefined || rpc.status < 500)) {
    const message = truncate(rpc.details || rpc.shortMessage);
    if (alreadyKnownPatterns.some((p) => p.test(message))) return { kind: 'already_known', detail: message };
    if (nonceTooLowPatterns.some((p) => p.test(message))) return { kind: 'nonce_too_low', detail: message };
    for (const [pattern, reason] of rejectionPatterns) {
      if (pattern.test(message)) return { kind: 'rejected', reason, detail: message };
    }
    return { kind: 'ambiguous', reason: 'unrecognised_error', detail: message };
  }
  if (findCause(error, TimeoutError) || isAbort(error)) {
    return { kind: 'ambiguous', reason: 'timeout', detail: 'no answer before the deadline' };
  }
  const http = findCause(error, HttpRequestError);
  if (http?.status !== undefined) {
    return { kind: 'ambiguous', reason: 'http_status', detail: `HTTP ${http.status}` };
  }
  if (http) {
    // No status: the connection failed, was reset, or the body was unreadable. A reset after the
    // request was written is the classic "node took it, answer lost" case.
    return { kind: 'ambiguous', reason: 'connection', detail: truncate(describeCause(http)) };
  }
  return { kind: 'ambiguous', reason: 'unrecognised_error', detail: truncate(String(error)) };
}

function findCause<T extends Error>(
  error: unknown,
  type: abstract new (...args: never[]) => T,
): T | undefined {
  if (error instanceof type) return error;
  if (error instanceof BaseError) {
    const found = error.walk((e) => e instanceof type);
    if (found instanceof type) return found;
  }
  return undefined;
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError');
}

function describeCause(error: Error): string {
  const parts: string[] = [];
  let current: unknown = error.cause;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    const code = (current as { code?: unknown }).code;
    parts.push(typeof code === 'string' ? `${current.message} (${code})` : current.message);
    current = current.cause;
  }
  return parts.join(': ') || error.message;
}

function truncate(text: string): string {
  return text.length > messageLengthMax ? `${text.slice(0, messageLengthMax)}…` : text;
}
