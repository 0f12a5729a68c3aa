import { defineIdemConfig } from '@idem/testing/vitest';

// A chaos run starts a dozen processes and waits for convergence: minutes, not seconds. It runs
// after every other package (turbo.json); the seeded runs and the failover drill, each about a core
// for a minute and a half, run side by side (own databases or formation, free ports).
export default defineIdemConfig({
  testTimeout: 240_000,
  hookTimeout: 60_000,
  fileParallelism: true,
});
