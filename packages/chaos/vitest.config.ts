import { defineIdemConfig } from '@idem/testing/vitest';

// A chaos run starts a dozen processes and waits for convergence: minutes, not seconds.
export default defineIdemConfig({ testTimeout: 240_000, hookTimeout: 60_000 });
