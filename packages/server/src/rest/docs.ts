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
    <script src="/docs/before.js"></script>
    <script src="/docs/scalar.js"></script>
    <script src="/docs/init.js"></script>
  </body>
</html>
`;

const INIT = `Scalar.createApiReference('#api-reference', {
  url: '/openapi.json',
  withDefaultFonts: false,
  telemetry: false,
});
`;

/**
 * Scalar 1.72's standalone bundle loads its default fonts from fonts.scalar.com unless told not to,
 * and with a single document it does not apply `withDefaultFonts: false` (its active-document
 * config is looked up under an empty name and not found). Our CSP blocks those fonts anyway; this
 * turns the configuration's default off so the page asks for nothing from another origin. A bundle without
 * this exact text (another Scalar version) fails loudly here, and the browser test with it.
 */
const FONTS_DEFAULT_ON = 'withDefaultFonts:ue({default:!0';
const FONTS_DEFAULT_OFF = 'withDefaultFonts:ue({default:!1';

async function loadBundle(): Promise<Buffer> {
  const source = await readFile(scalarBundle, 'utf8');
  if (source.split(FONTS_DEFAULT_ON).length !== 2) {
    throw new Error(`the Scalar bundle at ${scalarBundle} no longer has its font default; review docs.ts`);
  }
  return Buffer.from(source.replace(FONTS_DEFAULT_ON, FONTS_DEFAULT_OFF), 'utf8');
}

/**
 * The bundle's zod probes for eval (`Function('')`) to compile faster parsers; the CSP forbids
 * eval, so the probe would be a violation report. zod reads this global before it probes.
 */
const BEFORE = `globalThis.__zod_globalConfig = Object.assign(globalThis.__zod_globalConfig || {}, { jitless: true });
`;

let bundle: Promise<Buffer> | undefined;

/** Answers /docs and its three scripts; false for any other path. */
export async function serveDocs(pathname: string, res: ServerResponse): Promise<boolean> {
  if (pathname === '/docs' || pathname === '/docs/') {
    send(res, 'text/html; charset=utf-8', PAGE, 'no-store');
    return true;
  }
  if (pathname === '/docs/before.js') {
    send(res, 'text/javascript; charset=utf-8', BEFORE, 'no-store');
    return true;
  }
  if (pathname === '/docs/init.js') {
    send(res, 'text/javascript; charset=utf-8', INIT, 'no-store');
    return true;
  }
  if (pathname === '/docs/scalar.js') {
    bundle ??= loadBundle();
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
