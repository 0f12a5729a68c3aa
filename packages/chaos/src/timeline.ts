import type { Sql } from 'postgres';
import type { Cleanups } from './setup.ts';

export interface TimelineSample {
  tMs: number;
  phase: 'faults' | 'quiet';
  states: Record<string, number>;
}

/** Counts the withdrawals in each state once a second, from `startedAt`, for the report's timeline. */
export function sampleTimeline(sql: Sql, startedAt: number, cleanups: Cleanups) {
  const samples: TimelineSample[] = [];
  let phase: TimelineSample['phase'] = 'faults';
  const sampler = setInterval(() => {
    const tMs = Date.now() - startedAt;
    sql<
      { state: string; n: number }[]
    >`select state, count(*)::int as n from operations where kind = 'withdrawal' group by state`
      .then((rows) =>
        samples.push({ tMs, phase, states: Object.fromEntries(rows.map((r) => [r.state, r.n])) }),
      )
      .catch(() => {});
  }, 1_000);
  cleanups.push(async () => clearInterval(sampler));
  return {
    samples,
    quiet: () => {
      phase = 'quiet';
    },
    stop: () => clearInterval(sampler),
  };
}
