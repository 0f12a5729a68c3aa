/**
 * The failover drill inside a chaos run: the run's database lives on a pg_auto_failover
 * formation (a monitor, a primary, a synchronous standby; @idem/testing/formation's startFormation) and
 * the servers and workers connect with its multi-host, read-write connection string. Mid-run the
 * primary's postgres is SIGKILLed, or a planned switchover is performed; nobody restarts anything.
 *
 * A probe writes numbered rows through the same kind of connection all along: the first failed and
 * the first successful commit after the event give the write-unavailability window, and every row
 * it saw acknowledged must be on the promoted primary afterwards.
 */
import type { Formation, FormationNode } from '@idem/testing/formation';
import postgres, { type Sql } from 'postgres';
import type { CheckResult } from './invariants.ts';

export type FailoverScenario = 'kill' | 'switchover';

export interface FailoverPlan {
  scenario: FailoverScenario;
  formation: Formation;
}

export interface FailoverOutcome {
  scenario: FailoverScenario;
  /** When the event was triggered, ms since the fault phase began. */
  atMs: number;
  formerPrimary: string;
  promoted: string | null;
  /** From the event to the monitor reporting the other node primary and the pair settled again. */
  promotedAfterMs: number | null;
  /** From the probe's first failed commit to its first successful one after it (0: none failed). */
  writeUnavailableMs: number | null;
  probe: { acknowledged: number; failures: number; lost: number; errors: string[] };
  /** Calls the SDK clients had to repeat (transport errors and retryable answers) during the run. */
  clientRetries: number;
  /** Submissions the clients gave up on, retried with the same key once the service answered. */
  unknownRetried: number;
  unknownResolved: number;
  /** Resolved keys that are not exactly one operation in the database (must be empty). */
  unknownNotOne: string[];
  error: string | null;
}

/** PostgreSQL's SQLSTATE or postgres.js's connection code. */
function codeOf(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string };
  return code ?? message ?? String(error);
}

export function startProbe(databaseUrl: string) {
  const sql: Sql = postgres(databaseUrl, {
    max: 1,
    connect_timeout: 5,
    onnotice: () => {},
    connection: { application_name: 'idem-chaos-probe' },
  });
  const acknowledged: number[] = [];
  const errors = new Map<string, number>();
  let failures = 0;
  let firstFailureAt: number | null = null;
  let recoveredAt: number | null = null;
  let running = true;
  const ready = sql`create table if not exists chaos_failover_probe (n int primary key, at timestamptz default now())`;
  const loop = (async () => {
    await ready;
    for (let n = 1; running; n += 1) {
      try {
        await sql`insert into chaos_failover_probe (n) values (${n})`;
        acknowledged.push(n);
        if (firstFailureAt !== null && recoveredAt === null) recoveredAt = Date.now();
      } catch (error) {
        failures += 1;
        const code = codeOf(error);
        errors.set(code, (errors.get(code) ?? 0) + 1);
        // Only the first outage counts: the window is measured around the one event of the run.
        if (recoveredAt === null) firstFailureAt ??= Date.now();
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  return {
    ready,
    get windowMs(): number | null {
      if (firstFailureAt === null) return failures === 0 ? 0 : null;
      return recoveredAt === null ? null : recoveredAt - firstFailureAt;
    },
    async stop() {
      running = false;
      await loop;
    },
    /** Reads the table back (through the primary, after the failover) and lists what is missing. */
    async lost(): Promise<number[]> {
      const rows = await sql<{ n: number }[]>`select n from chaos_failover_probe`;
      const present = new Set(rows.map((row) => row.n));
      return acknowledged.filter((n) => !present.has(n));
    },
    summary() {
      return {
        acknowledged: acknowledged.length,
        failures,
        errors: [...errors].map(([code, n]) => `${code} x${n}`),
      };
    },
    close: () => sql.end({ timeout: 2 }),
  };
}

export type Probe = ReturnType<typeof startProbe>;

/** Performs the plan's event and waits for the formation to settle with the other node primary. */
export async function performFailover(
  plan: FailoverPlan,
  say: (line: string) => void,
): Promise<{ formerPrimary: FormationNode; promoted: FormationNode; promotedAfterMs: number }> {
  const formerPrimary = await plan.formation.primary();
  const began = Date.now();
  if (plan.scenario === 'kill') await plan.formation.killPrimary();
  else await plan.formation.switchover();
  say(`failover: ${plan.scenario} of ${formerPrimary.name}`);
  const promoted = await plan.formation.waitForPromotion(formerPrimary);
  const promotedAfterMs = Date.now() - began;
  say(`failover: ${promoted.name} is primary after ${promotedAfterMs} ms`);
  return { formerPrimary, promoted, promotedAfterMs };
}

/** The checks only a failover run makes; the shared invariants (acknowledged writes, chain, journal, holds, fencing) run too. */
export function failoverChecks(outcome: FailoverOutcome, unplannedExits: string[]): CheckResult[] {
  const check = (id: string, title: string, detail: string, violations: string[]): CheckResult => ({
    id,
    title,
    status: violations.length > 0 ? 'fail' : 'pass',
    detail,
    violations,
  });
  return [
    check(
      'F1',
      'the formation promoted the standby',
      `${outcome.scenario} of ${outcome.formerPrimary}; ${outcome.promoted ?? 'nobody'} primary after ${outcome.promotedAfterMs ?? '?'} ms`,
      outcome.error
        ? [outcome.error]
        : outcome.promoted && outcome.promoted !== outcome.formerPrimary
          ? []
          : ['no other node became primary'],
    ),
    check(
      'F2',
      'servers and workers resumed without a restart; the probe wrote again',
      `write-unavailability ${outcome.writeUnavailableMs ?? '?'} ms; probe ${outcome.probe.acknowledged} acknowledged, ${outcome.probe.failures} failed (${outcome.probe.errors.join(', ') || 'none'}); ${unplannedExits.length} unplanned process exits`,
      [
        ...unplannedExits.map((exit) => `process exited on its own: ${exit}`),
        ...(outcome.writeUnavailableMs === null
          ? ['the probe never wrote again after its first failure']
          : []),
      ],
    ),
    check(
      'F3',
      'zero acknowledged writes lost (the probe: every acknowledged row is on the promoted primary)',
      `${outcome.probe.acknowledged} acknowledged, ${outcome.probe.lost} missing`,
      outcome.probe.lost > 0 ? [`${outcome.probe.lost} acknowledged probe rows are missing`] : [],
    ),
    check(
      'F4',
      'a submission whose outcome the client never learned resolves to one operation on a retry with the same key',
      `${outcome.unknownRetried} given up and retried with the same key, ${outcome.unknownResolved} resolved, each to exactly one operation; ${outcome.clientRetries} client retries in the run`,
      [
        ...(outcome.unknownResolved < outcome.unknownRetried
          ? [`${outcome.unknownRetried - outcome.unknownResolved} submissions still unknown`]
          : []),
        ...outcome.unknownNotOne,
      ],
    ),
  ];
}
