import { readFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { SECURITY_HEADERS } from '../http/web-app.ts';

/**
 * The interactive API reference at /docs: Scalar's prebuilt browser bundle from its npm package,
 * served by us (no CDN), under the web app's own CSP. The page has no inline script: the reference
 * is started by /docs/init.js, and the default web fonts (another origin) are turned off.
 */
const scalarBundle = join(
  dirname(createRequire(import.meta.url).resolve('@scalar/api-reference')),
  'browser',
  'standalone.js',
);

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Idem API reference</title>
  </head>
  <body>
    <div id="api-reference"></div>
    <script src="/docs/scalar.js"></script>
    <script src="/docs/init.js"></script>
  </body>
</html>
`;

const INIT = `Scalar.createApiReference('#api-reference', {
  url: '/openapi.json',
  withDefaultFonts: false,
  hideClientButton: false,
  telemetry: false,
});
`;

let bundle: Promise<Buffer> | undefined;

/** Answers /docs, /docs/scalar.js and /docs/init.js; false for any other path. */
export async function serveDocs(pathname: string, res: ServerResponse): Promise<boolean> {
  if (pathname === '/docs' || pathname === '/docs/') {
    send(res, 'text/html; charset=utf-8', PAGE, 'no-store');
    return true;
  }
  if (pathname === '/docs/init.js') {
    send(res, 'text/javascript; charset=utf-8', INIT, 'no-store');
    return true;
  }
  if (pathname === '/docs/scalar.js') {
    bundle ??= readFile(scalarBundle);
    send(res, 'text/javascript; charset=utf-8', await bundle, 'public, max-age=3600');
    return true;
  }
  return false;
}

function send(res: ServerResponse, type: string, body: string | Buffer, cache: string): void {
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    'content-type': type,
    'content-length': Buffer.byteLength(body),
    'cache-control': cache,
  });
  res.end(body);
}
