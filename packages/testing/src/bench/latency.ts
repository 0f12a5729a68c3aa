/** Latency samples in milliseconds; percentiles by nearest rank over the sorted samples. */
export interface LatencySummary {
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export class LatencyRecorder {
  private readonly samples: number[] = [];

  record(ms: number): void {
    this.samples.push(ms);
  }

  /** Times one call and records it only if it succeeds: failed calls are counted elsewhere. */
  async time<T>(work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const result = await work();
    this.record(performance.now() - started);
    return result;
  }

  summary(): LatencySummary {
    const sorted = Float64Array.from(this.samples).sort();
    return {
      count: sorted.length,
      p50Ms: percentile(sorted, 0.5),
      p99Ms: percentile(sorted, 0.99),
      maxMs: sorted.length === 0 ? 0 : (sorted[sorted.length - 1] ?? 0),
    };
  }
}

export function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] ?? 0;
}
