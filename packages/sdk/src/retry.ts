/** Bounds on retrying one call: both a number of attempts and a total time, whichever ends first. */
export interface RetryPolicy {
  /** Attempts in total, the first included. */
  attemptsMax: number;
  /** No new attempt starts after this many milliseconds from the first. */
  totalMsMax: number;
  /** The first backoff's upper bound; it doubles per attempt, up to `delayMsMax`. */
  delayMsBase: number;
  delayMsMax: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  attemptsMax: 5,
  totalMsMax: 30_000,
  delayMsBase: 100,
  delayMsMax: 5_000,
};

/**
 * The wait before attempt `attempt + 1`: "full jitter" exponential backoff, so many clients that
 * failed together do not retry together; a server's `retryAfterMs` is a floor, with jitter on top.
 */
export function backoffMs(
  policy: RetryPolicy,
  attempt: number,
  retryAfterMs?: number,
  random = Math.random,
): number {
  const ceiling = Math.min(policy.delayMsMax, policy.delayMsBase * 2 ** (attempt - 1));
  const jittered = Math.floor(random() * ceiling);
  if (retryAfterMs !== undefined)
    return retryAfterMs + Math.floor(random() * Math.min(ceiling, retryAfterMs / 5 + 1));
  return jittered;
}
