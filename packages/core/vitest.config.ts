import { defineIdemConfig } from '@idem/testing/vitest';

// Each file has its own databases (copies of the migrated template), so two files run at once;
// the concurrency tests open many connections each (max_connections is raised by .ci/run).
export default defineIdemConfig({ testTimeout: 120_000, fileParallelism: true });
