import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { IdemError } from '@idem/contracts';

/** Session cookies by base name; with secure cookies they are sent as `__Host-<name>`. */
export const STAFF_COOKIE = 'idem_staff';
export const CUSTOMER_COOKIE = 'idem_customer';
/**
 * A `__Host-` cookie is only accepted by a browser from a secure origin, with Path=/ and no
 * Domain, so neither a sibling subdomain nor a plain-http attacker can plant or widen it.
 */
const SECURE_PREFIX = '__Host-';
export const CSRF_HEADER = 'x-csrf-token';

/**
 * What a browser request carries that the web procedures need: its cookies, its origin, the CSRF
 * header, and a way to set cookies on the response. Absent for callers that build a context by
 * hand (tests through createCaller), which therefore cannot reach the browser procedures.
 */
export interface WebRequest {
  /**
   * The request's cookies by base name. With secure cookies only `__Host-` ones count (prefix
   * removed): an unprefixed session cookie may have been planted, and is ignored.
   */
  cookies: Record<string, string>;
  /** The Origin header, when the browser sent one. */
  origin: string | null;
  /** scheme://host the request was addressed to. */
  selfOrigin: string;
  /**
   * Where links mailed to people point (invitations): IDEM_PUBLIC_URL's origin. In development
   * without it, the request's own origin; in a deployment without it, null (nothing is mailed),
   * since a Host header is the caller's to write and would send the link wherever they like.
   */
  mailedLinkOrigin: string | null;
  csrfHeader: string | null;
  secureCookies: boolean;
  /** Sets a cookie by base name: `__Host-<name>; Path=/; HttpOnly; SameSite=Strict; ...; Secure`, no Domain. */
  setCookie(name: string, value: string, options: { maxAgeSeconds: number }): void;
}

export function webRequestOf(
  req: IncomingMessage,
  res: ServerResponse,
  options: { secureCookies: boolean; publicUrl: string | undefined; development: boolean },
): WebRequest {
  const host = req.headers.host ?? 'localhost';
  const scheme = options.secureCookies ? 'https' : 'http';
  const selfOrigin = options.publicUrl ? new URL(options.publicUrl).origin : `${scheme}://${host}`;
  return {
    cookies: sessionCookies(parseCookies(req.headers.cookie), options.secureCookies),
    origin: typeof req.headers.origin === 'string' ? req.headers.origin : null,
    selfOrigin,
    mailedLinkOrigin: options.publicUrl || options.development ? selfOrigin : null,
    csrfHeader: typeof req.headers[CSRF_HEADER] === 'string' ? req.headers[CSRF_HEADER] : null,
    secureCookies: options.secureCookies,
    setCookie(name, value, { maxAgeSeconds }) {
      // httpOnly: no script reads it; SameSite=Strict: no other site's page sends it.
      const parts = [
        `${options.secureCookies ? SECURE_PREFIX : ''}${name}=${value}`,
        'Path=/',
        'HttpOnly',
        'SameSite=Strict',
        `Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}`,
      ];
      if (options.secureCookies) parts.push('Secure');
      res.appendHeader('set-cookie', parts.join('; '));
    },
  };
}

function sessionCookies(cookies: Record<string, string>, secure: boolean): Record<string, string> {
  if (!secure) return cookies;
  const prefixed: Record<string, string> = {};
  for (const [name, value] of Object.entries(cookies)) {
    if (name.startsWith(SECURE_PREFIX)) prefixed[name.slice(SECURE_PREFIX.length)] = value;
  }
  return prefixed;
}

export function parseCookies(header: string | undefined): Record<string, string> {
  const cookies: Record<string, string> = {};
  for (const part of (header ?? '').split(';').slice(0, 50)) {
    const index = part.indexOf('=');
    if (index <= 0) continue;
    const name = part.slice(0, index).trim();
    if (name && !(name in cookies)) cookies[name] = part.slice(index + 1).trim();
  }
  return cookies;
}

/**
 * The CSRF token of a session: derived from the session secret, so it needs no storage, changes
 * with every session, and cannot be computed by a page that cannot read the httpOnly cookie.
 */
export function csrfTokenFor(sessionToken: string): string {
  return createHash('sha256').update(`idem-csrf:${sessionToken}`, 'utf8').digest('base64url');
}

/** A browser that says where the request comes from must say it comes from us. */
export function assertSameOrigin(web: WebRequest): void {
  if (web.origin !== null && web.origin !== web.selfOrigin) {
    throw new IdemError('FORBIDDEN', 'cross-origin request refused');
  }
}

/** Mutations of a session need the same origin and the session's CSRF token in the header. */
export function assertCsrf(web: WebRequest, sessionToken: string): void {
  assertSameOrigin(web);
  if (web.csrfHeader === null || !sameSecret(web.csrfHeader, csrfTokenFor(sessionToken))) {
    throw new IdemError('FORBIDDEN', 'missing or wrong CSRF token; reload the page and try again');
  }
}

export function requireWeb(web: WebRequest | undefined): WebRequest {
  if (!web) throw new IdemError('UNAUTHORIZED', 'this procedure is for the web screens');
  return web;
}

/** Compares secrets in constant time, so a wrong token reveals nothing about the right one. */
function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}
