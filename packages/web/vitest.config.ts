import { defineConfig } from 'vitest/config';

/** Browser tests: each file starts its own server and Chromium; they run one file at a time. */
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 90_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
