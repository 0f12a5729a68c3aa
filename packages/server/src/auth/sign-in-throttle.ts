/**
 * Bounds password guessing per (tenant, e-mail) in this process: after FAILURES_MAX failures in
 * WINDOW_MS further attempts are refused until the window passes. A multi-node deployment gets
 * one budget per node; the argon2id cost bounds the rest.
 */
const FAILURES_MAX = 10;
const WINDOW_MS = 15 * 60_000;
const TRACKED_MAX = 10_000;

export class SignInThrottle {
  private readonly failures = new Map<string, { count: number; since: number }>();

  blockedMs(key: string, now = Date.now()): number {
    const entry = this.failures.get(key);
    if (!entry || now - entry.since > WINDOW_MS) return 0;
    return entry.count >= FAILURES_MAX ? WINDOW_MS - (now - entry.since) : 0;
  }

  fail(key: string, now = Date.now()): void {
    const entry = this.failures.get(key);
    if (!entry || now - entry.since > WINDOW_MS) {
      if (this.failures.size >= TRACKED_MAX) this.failures.clear();
      this.failures.set(key, { count: 1, since: now });
    } else {
      entry.count += 1;
    }
  }

  succeed(key: string): void {
    this.failures.delete(key);
  }
}

export const signInThrottle = new SignInThrottle();
