import { defineIdemConfig } from '@idem/testing/vitest';

/**
 * Browser tests: each file starts its own server (free port, own data directory) and Chromium; two
 * files run at once. isolate off: a worker imports core, the server's pieces and Playwright once for
 * all its files (each file re-imported them: 84 s of a CI run's CPU); no module keeps state a later
 * file depends on (the server bundle is built once per worker).
 */
export default defineIdemConfig({
  testTimeout: 90_000,
  hookTimeout: 120_000,
  fileParallelism: true,
  isolate: false,
});
