import { defineIdemConfig } from '@idem/testing/vitest';

// Each file has its own databases and its own anvil on a free port, so two files run at once.
export default defineIdemConfig({ testTimeout: 120_000, fileParallelism: true });
