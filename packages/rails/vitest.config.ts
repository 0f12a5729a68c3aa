import { defineIdemConfig } from '@idem/testing/vitest';

// Two cores are shared with other agents: one file at a time keeps anvil and the simulator responsive.
export default defineIdemConfig({ testTimeout: 30_000 });
