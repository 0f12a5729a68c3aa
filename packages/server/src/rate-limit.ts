/**
 * A token bucket per tenant, in process memory: a limit on how fast one credential can push work
 * at the database. Per process, so N processes allow N times the rate (docs/API.md).
 */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; updatedMs: number }>();
  private static readonly BUCKETS_MAX = 100_000;

  constructor(
    private readonly perSecond: number,
    private readonly burst = perSecond * 2,
  ) {}

  /**
   * Takes `cost` tokens (a bulk call costs one per item); returns 0 when allowed, or the
   * milliseconds until that many are available. A cost above the burst is charged as the burst, so
   * a bulk call larger than the bucket still goes through once the bucket is full.
   */
  take(key: string, cost = 1, nowMs = Date.now()): number {
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= RateLimiter.BUCKETS_MAX) this.buckets.clear();
      bucket = { tokens: this.burst, updatedMs: nowMs };
      this.buckets.set(key, bucket);
    }
    bucket.tokens = Math.min(
      this.burst,
      bucket.tokens + ((nowMs - bucket.updatedMs) / 1000) * this.perSecond,
    );
    bucket.updatedMs = nowMs;
    const charged = Math.min(Math.max(cost, 0), this.burst);
    if (bucket.tokens >= charged) {
      bucket.tokens -= charged;
      return 0;
    }
    return Math.ceil(((charged - bucket.tokens) / this.perSecond) * 1000);
  }
}
