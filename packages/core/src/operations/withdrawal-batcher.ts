/**
 * Gathers concurrent withdrawal submissions into batches. A submission goes out at once
 * while fewer than `concurrency` batches of its group (one tenant and actor) are being written;
 * otherwise it waits for one of them to finish, for `maxItems` submissions of its group to be
 * waiting, or for `maxWaitMs`, whichever comes first, and goes out with the others of its group in
 * one statement. Groups never wait on each other: only items of one group can share a statement, so
 * a tenant's submissions gain nothing by waiting behind another tenant's batch. An idle system
 * therefore sends every submission alone, as before; a busy one pays one executor start-up, WAL
 * flush and COMMIT per batch. Every caller is answered with its own item's outcome, after the
 * COMMIT that holds it.
 */
export interface BatchingOptions {
  /** At most this many items per statement (default 64). */
  maxItems: number;
  /** A waiting submission goes out after this long even when `concurrency` batches are in flight (default 2). */
  maxWaitMs: number;
  /**
   * Batches of one group written at once before its submissions start to gather (default 1 on
   * PostgreSQL and PGlite: the next batch forms while one commits, so batches grow with the load).
   */
  concurrency: number;
  /**
   * A submission waits to be gathered only when at least this many of its group's submissions,
   * itself included, are being written or waiting (default 4); with fewer it goes at once, as
   * PostgreSQL's commit_siblings does for commit_delay. A batch of two costs PostgreSQL about what
   * its two calls cost alone (docs/BENCHMARKS.md), and gathering makes a lightly loaded system's
   * callers wait behind each other: gathering from the second (with a 10 ms wait) raised p50 at
   * 400 calls/s from about 3.3 to 4.6 ms on the bench.
   */
  gatherFrom: number;
}

/**
 * One batch of a group in flight: the next one forms while it commits, so batches grow with the
 * load (against one per pooled connection on the server bench: 12% to 20% more calls per second at
 * 16 clients, about twice the items per commit). Gathering from four: below that a lightly loaded
 * server answered slower than without batching (docs/BENCHMARKS.md).
 */
export const DEFAULT_BATCHING: BatchingOptions = {
  maxItems: 64,
  maxWaitMs: 2,
  concurrency: 1,
  gatherFrom: 4,
};

/** What one item came to, as the writer reports it. */
export type Settled<T> = { ok: true; claim: T } | { ok: false; error: unknown };

interface Waiting<I, T> {
  group: string;
  item: I;
  since: number;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export class SubmissionBatcher<I, T> {
  private readonly waiting: Waiting<I, T>[] = [];
  /** Batches being written and the submissions in them, per group; a group with none is absent. */
  private readonly inFlight = new Map<string, { batches: number; items: number }>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: BatchingOptions,
    /** The batch's group (one tenant and actor per statement). */
    private readonly groupOf: (item: I) => string,
    /** Writes one group's items in one statement; one outcome per item, in order. */
    private readonly write: (items: I[]) => Promise<Settled<T>[]>,
    /** Told of each batch once it is answered: its size and the seconds from send to answer. */
    private readonly observe?: (items: number, seconds: number) => void,
  ) {}

  submit(item: I): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ group: this.groupOf(item), item, since: performance.now(), resolve, reject });
      this.pump();
    });
  }

  /** Sends what may go now; arms the timer for what must wait. */
  private pump(): void {
    for (let group = this.readyGroup(); group !== undefined; group = this.readyGroup()) {
      this.send(group, this.take(group));
    }
    // Everything still waiting is held back; the oldest entry is the first to fall due.
    const oldest = this.waiting[0];
    if (oldest) this.arm(oldest.since + this.options.maxWaitMs - performance.now());
  }

  /**
   * The group, oldest first, whose waiting items may go now: it has a batch slot free, its oldest
   * item has waited `maxWaitMs`, `maxItems` of it are waiting, or too few of it are in flight and
   * waiting for a batch to pay (`gatherFrom`).
   */
  private readyGroup(): string | undefined {
    const now = performance.now();
    const waitingOf = new Map<string, number>();
    for (const entry of this.waiting) waitingOf.set(entry.group, (waitingOf.get(entry.group) ?? 0) + 1);
    const seen = new Set<string>();
    for (const entry of this.waiting) {
      if (seen.has(entry.group)) continue;
      seen.add(entry.group);
      const writing = this.inFlight.get(entry.group) ?? { batches: 0, items: 0 };
      const waiting = waitingOf.get(entry.group) ?? 0;
      if (
        writing.batches < this.options.concurrency ||
        now - entry.since >= this.options.maxWaitMs ||
        waiting >= this.options.maxItems ||
        waiting + writing.items < this.options.gatherFrom
      ) {
        return entry.group;
      }
    }
    return undefined;
  }

  /** The oldest `maxItems` waiting items of one group, in arrival order. */
  private take(group: string): Waiting<I, T>[] {
    const taken: Waiting<I, T>[] = [];
    for (let index = 0; index < this.waiting.length && taken.length < this.options.maxItems; ) {
      const entry = this.waiting[index] as Waiting<I, T>;
      if (entry.group === group) {
        taken.push(entry);
        this.waiting.splice(index, 1);
      } else {
        index += 1;
      }
    }
    return taken;
  }

  private arm(delayMs: number): void {
    if (this.timer) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.pump();
      },
      Math.max(0, Math.ceil(delayMs)),
    );
  }

  private send(group: string, batch: Waiting<I, T>[]): void {
    const sentAt = performance.now();
    const writing = this.inFlight.get(group) ?? { batches: 0, items: 0 };
    writing.batches += 1;
    writing.items += batch.length;
    this.inFlight.set(group, writing);
    this.write(batch.map((entry) => entry.item))
      .then(
        (outcomes) => {
          batch.forEach((entry, index) => {
            const outcome = outcomes[index];
            if (!outcome) entry.reject(new Error('the batch answered no outcome for this item'));
            else if (outcome.ok) entry.resolve(outcome.claim);
            else entry.reject(outcome.error);
          });
        },
        (error: unknown) => {
          for (const entry of batch) entry.reject(error);
        },
      )
      .finally(() => {
        this.observe?.(batch.length, (performance.now() - sentAt) / 1000);
        writing.batches -= 1;
        writing.items -= batch.length;
        if (writing.batches === 0) this.inFlight.delete(group);
        this.pump();
      });
  }
}
