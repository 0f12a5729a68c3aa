import type { IncomingMessage } from 'node:http';

/**
 * The client address a request counts against (the sign-in budget per address, I11-F7). By
 * default the TCP peer: X-Forwarded-For is written by whoever sends the request, so trusting it
 * would let a guesser take a fresh budget per guess. Behind `trustedProxyHops` reverse proxies
 * that each append the address they saw, the client is that many entries from the right.
 */
export function clientAddressOf(req: IncomingMessage, trustedProxyHops: number): string {
  const peer = req.socket.remoteAddress ?? 'unknown';
  if (trustedProxyHops === 0) return peer;
  const header = req.headers['x-forwarded-for'];
  const entries = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  // Fewer entries than proxies: the request did not come through them all; count the peer.
  return entries.at(-trustedProxyHops) ?? peer;
}
