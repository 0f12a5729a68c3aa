import { defineIdemConfig } from '@idem/testing/vitest';

// One file at a time: several tests here time a worker's pass against real intervals (stall alerts,
// node evidence, signer timeouts), and a second file beside them on two cores made them miss.
export default defineIdemConfig({ testTimeout: 120_000 });
