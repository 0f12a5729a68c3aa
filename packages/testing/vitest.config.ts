import { defineIdemConfig } from './src/vitest.js';

export default defineIdemConfig({ testTimeout: 60_000 });
