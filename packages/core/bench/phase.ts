import { LatencyRecorder, type LatencySummary } from '@idem/testing/bench';

export interface TimedResult {
  /** Every successful call, warm-up included: what the database must now contain. */
  succeeded: number;
  failed: number;
  firstError: unknown;
  /** Calls started inside the measured window and finished. */
  measured: number;
  seconds: number;
  opsPerSec: number;
  latency: LatencySummary;
}

/**
 * Runs `call` in `concurrency` closed loops: a warm-up (not measured), then a measured window.
 * A call started inside the window counts even if it finishes after it; the window closes when the
 * last one does, so throughput is never flattered by calls cut off mid-flight.
 */
export async function runTimed(options: {
  concurrency: number;
  warmupMs: number;
  measureMs: number;
  call: (worker: number, seq: number) => Promise<void>;
}): Promise<TimedResult> {
  const latency = new LatencyRecorder();
  let phase: 'warmup' | 'measure' | 'stop' = 'warmup';
  let succeeded = 0;
  let failed = 0;
  let measured = 0;
  let firstError: unknown;

  const worker = async (id: number) => {
    for (let seq = 0; phase !== 'stop'; seq += 1) {
      const inWindow = phase === 'measure';
      const started = performance.now();
      try {
        await options.call(id, seq);
        succeeded += 1;
        if (inWindow) {
          latency.record(performance.now() - started);
          measured += 1;
        }
      } catch (error) {
        failed += 1;
        firstError ??= error;
      }
    }
  };

  let measureStart = 0;
  const clock = (async () => {
    await sleep(options.warmupMs);
    phase = 'measure';
    measureStart = performance.now();
    await sleep(options.measureMs);
    phase = 'stop';
  })();
  await Promise.all([clock, ...Array.from({ length: options.concurrency }, (_, id) => worker(id))]);
  const seconds = (performance.now() - measureStart) / 1000;
  return {
    succeeded,
    failed,
    firstError,
    measured,
    seconds,
    opsPerSec: measured / seconds,
    latency: latency.summary(),
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
