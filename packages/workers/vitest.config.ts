import { defineIdemConfig } from '@idem/testing/vitest';

// isolate off: a worker process imports the package's modules once for all the files it runs (half
// the wall time of a run of light files); no module here keeps state that a later file depends on.

// One file at a time: a few tests here time a worker's pass against real intervals (stall alerts,
// signer timeouts, lease expiry), and a second file beside them on two cores made them miss.
export default defineIdemConfig({ testTimeout: 120_000, isolate: false });
