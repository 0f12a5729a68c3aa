/**
 * The server bench's load: closed loops (each client sends its next call when the last is
 * answered) and an open loop (calls due on a schedule), with one sequence of withdrawal ids and one
 * running total of what the clients were told, to check against the database at the end.
 */
import type { Submit, Tally } from './measure.ts';

export class LoadGenerator {
  private sequence = 0;
  /** Every call's outcome so far, across phases. */
  readonly total = { created: 0, errors: 0 };

  constructor(private readonly window: { warmupMs: number; seconds: number }) {}

  nextId(prefix: string): string {
    this.sequence += 1;
    return `${prefix}${this.sequence}`;
  }

  /**
   * `clients` concurrent callers, each sending its next call when the last is answered, for a
   * warm-up and then the measured window; `perSecond`, if given, counts the answers in each second.
   */
  async closedLoop(
    prefix: string,
    clients: number,
    clientFor: () => Submit,
    account: () => string,
    window: { warmupMs: number; seconds: number; perSecond?: number[] } = this.window,
  ): Promise<Tally> {
    const tally: Tally = { samples: [], created: 0, errors: 0 };
    const begins = performance.now();
    const warmupEnds = begins + window.warmupMs;
    const ends = warmupEnds + window.seconds * 1000;
    await Promise.all(
      Array.from({ length: clients }, async () => {
        const submit = clientFor();
        for (;;) {
          const started = performance.now();
          if (started >= ends) return;
          try {
            if ((await submit(this.nextId(prefix), account())) === 'CREATED') tally.created += 1;
            if (window.perSecond) {
              const second = Math.floor((performance.now() - begins) / 1000);
              window.perSecond[second] = (window.perSecond[second] ?? 0) + 1;
            }
            if (started >= warmupEnds) tally.samples.push(performance.now() - started);
          } catch {
            tally.errors += 1;
          }
        }
      }),
    );
    return this.count(tally);
  }

  /** Calls arriving at a fixed rate whatever the answers' pace: latency as an integrator sees it. */
  async openLoop(prefix: string, perSecond: number, submit: Submit, account: () => string): Promise<Tally> {
    const tally: Tally = { samples: [], created: 0, errors: 0 };
    const interval = 1000 / perSecond;
    const started = performance.now();
    // A warm-up as the closed loops have: run alone (BENCH_OPEN_RATE), a cold server's first
    // calls (JIT, connections, plans) would otherwise be the phase's p99.
    const warmupEnds = started + this.window.warmupMs;
    const ends = warmupEnds + this.window.seconds * 1000;
    const calls: Promise<void>[] = [];
    for (let n = 0; started + n * interval < ends; n += 1) {
      const due = started + n * interval;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
      calls.push(
        submit(this.nextId(prefix), account()).then(
          (outcome) => {
            if (outcome === 'CREATED') tally.created += 1;
            // From when the call was due: a late send counts against the system, not for it.
            if (due >= warmupEnds) tally.samples.push(performance.now() - due);
          },
          () => {
            tally.errors += 1;
          },
        ),
      );
    }
    await Promise.all(calls);
    return this.count(tally);
  }

  private count(tally: Tally): Tally {
    this.total.created += tally.created;
    this.total.errors += tally.errors;
    return tally;
  }
}
