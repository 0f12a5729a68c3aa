/**
 * A failover drill inside a chaos run: instead of the seeded schedule, the primary is
 * lost 40% into the fault phase while a probe commits writes; afterwards the clients' given-up
 * submissions are asked again, and the outcome joins the report with its own checks.
 */
import type { Sql } from 'postgres';
import {
  type FailoverOutcome,
  type FailoverPlan,
  failoverChecks,
  type Probe,
  performFailover,
  startProbe,
} from './failover.ts';
import { type IntegratorLog, resolveUnknown, sleep } from './integrators.ts';
import type { CheckResult } from './invariants.ts';
import type { Cleanups } from './setup.ts';

/** What the event itself came to; the rest of FailoverOutcome is measured after the run. */
export type FailoverEvent = Omit<
  FailoverOutcome,
  'writeUnavailableMs' | 'probe' | 'clientRetries' | 'unknownRetried' | 'unknownResolved' | 'unknownNotOne'
>;

export interface FailoverDrill {
  probe: Probe;
  /** Settles once the formation has a new primary (or the failover failed). */
  event: Promise<FailoverEvent>;
}

export function startFailoverDrill(input: {
  plan: FailoverPlan;
  databaseUrl: string;
  durationMs: number;
  say: (line: string) => void;
  cleanups: Cleanups;
}): FailoverDrill {
  const { plan } = input;
  const probe = startProbe(input.databaseUrl);
  input.cleanups.push(() => probe.close());
  const atMs = Math.round(input.durationMs * 0.4);
  const event = sleep(atMs)
    .then(() => performFailover(plan, input.say))
    .then(
      ({ formerPrimary, promoted, promotedAfterMs }) => ({
        scenario: plan.scenario,
        atMs,
        formerPrimary: formerPrimary.name,
        promoted: promoted.name,
        promotedAfterMs,
        error: null,
      }),
      (error: unknown) => ({
        scenario: plan.scenario,
        atMs,
        formerPrimary: '?',
        promoted: null,
        promotedAfterMs: null,
        error: `failover ${plan.scenario}: ${(error as Error).message}`,
      }),
    );
  return { probe, event };
}

/** What the clients gave up on during the failover, asked again with the same key. */
export interface UnknownRetries {
  retried: number;
  resolved: number;
  /** Resolved keys that are not exactly one operation in the database (must be empty). */
  notOne: string[];
}

export async function retryUnknown(sql: Sql, integrators: IntegratorLog): Promise<UnknownRetries> {
  const { retried, resolved, resolvedKeys } = await resolveUnknown(integrators);
  // Each given-up submission, once resolved, must be exactly one operation in the database.
  const notOne =
    resolvedKeys.length === 0
      ? []
      : (
          await sql<{ key: string; n: number }[]>`
            select k.key, (select count(*)::int from operations o where o.idempotency_key = k.key) as n
            from unnest(${resolvedKeys}::text[]) as k(key)`
        )
          .filter((row) => row.n !== 1)
          .map((row) => `key ${row.key}: ${row.n} operations`);
  return { retried, resolved, notOne };
}

/** Stops the probe and completes the outcome; its checks are appended to `checks`. */
export async function finishFailoverDrill(input: {
  drill: FailoverDrill;
  ended: FailoverEvent;
  retries: UnknownRetries;
  integrators: IntegratorLog;
  unplannedExits: string[];
  checks: CheckResult[];
}): Promise<FailoverOutcome> {
  const { probe } = input.drill;
  await probe.stop();
  const lost = await probe.lost();
  const summary = probe.summary();
  const failover: FailoverOutcome = {
    ...input.ended,
    writeUnavailableMs: probe.windowMs,
    probe: { ...summary, lost: lost.length },
    clientRetries: Object.entries(input.integrators.counts)
      .filter(([name]) => name === 'transport_errors' || name.startsWith('api_'))
      .reduce((sum, [, n]) => sum + n, 0),
    unknownRetried: input.retries.retried,
    unknownResolved: input.retries.resolved,
    unknownNotOne: input.retries.notOne,
  };
  input.checks.push(...failoverChecks(failover, input.unplannedExits));
  return failover;
}
