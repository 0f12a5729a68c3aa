import { defineIdemConfig } from '@idem/testing/vitest';

/** Browser tests: each file starts its own server and Chromium; they run one file at a time. */
export default defineIdemConfig({ testTimeout: 90_000, hookTimeout: 120_000 });
