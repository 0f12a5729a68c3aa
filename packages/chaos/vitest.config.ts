import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // A chaos run starts a dozen processes and waits for convergence: minutes, not seconds.
    testTimeout: 240_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
