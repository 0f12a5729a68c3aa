import { defineIdemConfig } from '@idem/testing/vitest';

// isolate off: a worker process imports the package's modules once for all the files it runs (half
// the wall time of a run of light files); no module here keeps state that a later file depends on.

// Each file has its own databases (copies of the migrated template), so two files run at once;
// the concurrency tests open many connections each (max_connections is raised by .ci/run).
export default defineIdemConfig({ testTimeout: 120_000, fileParallelism: true, isolate: false });
