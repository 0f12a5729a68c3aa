import { defineIdemConfig } from '@idem/testing/vitest';

// Each file has its own databases and servers on free ports, so two files run at once.
export default defineIdemConfig({
  testTimeout: 120_000,
  globalSetup: ['test/support/global-setup.ts'],
  fileParallelism: true,
});
