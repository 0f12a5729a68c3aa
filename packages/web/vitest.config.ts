import { defineIdemConfig } from '@idem/testing/vitest';

/** Browser tests: each file starts its own server (free port, own data directory) and Chromium; two files run at once. */
export default defineIdemConfig({ testTimeout: 90_000, hookTimeout: 120_000, fileParallelism: true });
