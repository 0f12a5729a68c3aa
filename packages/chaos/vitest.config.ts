import { defineIdemConfig } from '@idem/testing/vitest';

// A chaos run starts a dozen processes and waits for convergence: minutes, not seconds. One file at
// a time, after every other package (turbo.json): the seeded runs and the failover drill side by
// side took 121 s instead of 183 s on a quiet machine, but on a loaded one both seeded runs missed
// convergence (workers' passes stalled 15 s), so the drill keeps the machine to itself.
export default defineIdemConfig({ testTimeout: 240_000, hookTimeout: 60_000 });
