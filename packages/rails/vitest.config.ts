import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores are shared with other agents: one file at a time keeps anvil and the simulator responsive.
    fileParallelism: false,
  },
});
