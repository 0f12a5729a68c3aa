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

  /** Takes one token; returns 0 when allowed, or the milliseconds until a token is available. */
  take(key: string, nowMs = Date.now()): number {
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
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) / this.perSecond) * 1000);
  }
}
