import { readFile, stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
};

/**
 * Headers for every page of the web app. The CSP allows only our own scripts; styles may be inline
 * (the component library sets style attributes); images may come from https (tenant logos). No
 * framing (clickjacking), and no Referer, so a customer link's URL never leaves the page.
 */
export const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' https: data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

/** Paths the single-page app routes itself: they all get index.html. */
const APP_ROUTES = /^\/(?:$|customer(?:\/|$)|staff(?:\/|$))/;

/**
 * Serves the built web app (packages/web/dist) for GET and HEAD: a file under /assets, or
 * index.html for the app's own routes. Returns false when the path is not the app's, so the
 * caller answers 404 as before. A missing build answers 503 with what to run.
 */
export async function serveWebApp(
  req: IncomingMessage,
  res: ServerResponse,
  pathname: string,
  distDir: string,
): Promise<boolean> {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  const isAsset = pathname.startsWith('/assets/') || pathname === '/favicon.svg';
  if (!isAsset && !APP_ROUTES.test(pathname)) return false;
  const root = normalize(distDir);
  const file = isAsset ? normalize(join(root, decodeURIComponent(pathname))) : join(root, 'index.html');
  if (!file.startsWith(root + sep)) return false;
  const found = await stat(file).catch(() => null);
  if (!found?.isFile()) {
    if (isAsset) return false;
    res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' });
    res.end('The web app is not built: run `pnpm --filter @idem/web build`.\n');
    return true;
  }
  const body = await readFile(file);
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    'content-type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream',
    'content-length': body.length,
    // Built assets carry a content hash in their names; index.html must always be fresh.
    'cache-control': isAsset ? 'public, max-age=31536000, immutable' : 'no-store',
  });
  res.end(req.method === 'HEAD' ? undefined : body);
  return true;
}
