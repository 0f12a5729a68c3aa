/** Bench support: pgbench as the yardstick, latency percentiles, and scratch databases to run in. */

export { LatencyRecorder, type LatencySummary, percentile } from './latency.ts';
export { type PgbenchResult, parseTps, pgbenchTps, runPgbench } from './pgbench.ts';
export { createScratchDatabase, type ScratchDatabase, serverUrl } from './scratch.ts';
