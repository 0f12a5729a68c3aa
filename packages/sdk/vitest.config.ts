import { defineIdemConfig } from '@idem/testing/vitest';

export default defineIdemConfig({ testTimeout: 120_000 });
