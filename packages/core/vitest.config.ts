import { defineIdemConfig } from '@idem/testing/vitest';

// Files share one PostgreSQL server; concurrency tests open many connections each.
export default defineIdemConfig({ testTimeout: 120_000 });
