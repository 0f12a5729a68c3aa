/**
 * Gathers concurrent withdrawal submissions into batches (issue 17). A submission goes out at once
 * while fewer than `concurrency` batches are being written; otherwise it waits for a batch to finish,
 * for `maxItems` submissions of its tenant to be waiting, or for `maxWaitMs`, whichever comes first,
 * and goes out with the others of its tenant in one statement. An idle system therefore sends every
 * submission alone, as before; a busy one pays one executor start-up, WAL flush and COMMIT per batch.
 * Every caller is answered with its own item's outcome, after the COMMIT that holds it.
 */
export interface BatchingOptions {
  /** At most this many items per statement (default 64). */
  maxItems: number;
  /** A waiting submission goes out after this long even when `concurrency` batches are in flight (default 2). */
  maxWaitMs: number;
  /** Batches written at once before submissions start to gather (default: the pool size, at most 4). */
  concurrency: number;
}

export const DEFAULT_BATCHING: Omit<BatchingOptions, 'concurrency'> = { maxItems: 64, maxWaitMs: 2 };

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
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: BatchingOptions,
    /** The batch's group (one tenant and actor per statement). */
    private readonly groupOf: (item: I) => string,
    /** Writes one group's items in one statement; one outcome per item, in order. */
    private readonly write: (items: I[]) => Promise<Settled<T>[]>,
  ) {}

  submit(item: I): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ group: this.groupOf(item), item, since: performance.now(), resolve, reject });
      this.pump();
    });
  }

  /** Sends what may go now; arms the timer for what must wait. */
  private pump(): void {
    while (this.waiting.length > 0) {
      const oldest = this.waiting[0] as Waiting<I, T>;
      const overdue = performance.now() - oldest.since >= this.options.maxWaitMs;
      if (this.inFlight < this.options.concurrency || overdue || this.fullGroup()) {
        this.send(this.take(oldest.group));
        continue;
      }
      this.arm(oldest.since + this.options.maxWaitMs - performance.now());
      return;
    }
  }

  private fullGroup(): boolean {
    if (this.waiting.length < this.options.maxItems) return false;
    const counts = new Map<string, number>();
    for (const entry of this.waiting) {
      const count = (counts.get(entry.group) ?? 0) + 1;
      if (count >= this.options.maxItems) return true;
      counts.set(entry.group, count);
    }
    return false;
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

  private send(batch: Waiting<I, T>[]): void {
    this.inFlight += 1;
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
        this.inFlight -= 1;
        this.pump();
      });
  }
}
