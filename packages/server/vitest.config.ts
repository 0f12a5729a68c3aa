import { defineIdemConfig } from '@idem/testing/vitest';

// isolate off: a worker process imports the package's modules once for all the files it runs (half
// the wall time of a run of light files); no module here keeps state that a later file depends on.

// Each file has its own databases and servers on free ports, so two files run at once.
export default defineIdemConfig({
  testTimeout: 120_000,
  globalSetup: ['test/support/global-setup.ts'],
  fileParallelism: true,
  isolate: false,
});
