import type { OperationState, Overview } from '@idem/contracts';
import { type SQL, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { listAttentionQueue } from '../staff/queries.ts';
import { HOLDING_STATES } from '../state-machine/transitions.ts';

const DAY_MS = 24 * 3600_000;

/** Approved and not settled: what may still leave a hot wallet (FAILED_TERMINAL reverted; it holds, but does not go out). */
const OUTFLOW_STATES: readonly OperationState[] = ['APPROVED', 'SIGNING', 'SIGNED', 'BROADCAST', 'UNKNOWN'];

const list = (states: readonly string[]) =>
  sql.join(
    states.map((state) => sql`${state}`),
    sql`, `,
  );

/**
 * Every statement the Overview runs over the tenant's operations and logs, unexecuted, so a test
 * can EXPLAIN each (core/test/overview.test.ts). None reads the tenant's settled history: the open
 * withdrawals come through `operations_page_kind_state` restricted to the holding states, the day's
 * through a `created_at` range of `operations_page_kind`, the day's confirmations through the
 * partial index `operation_transitions_confirmed`, and counts through the status indexes.
 */
export function overviewStatements(tenantId: string, now: Date) {
  // Bound as text: postgres.js takes no Date in a raw statement.
  const since = sql`${new Date(now.getTime() - DAY_MS).toISOString()}::timestamptz`;
  const at = sql`${now.toISOString()}::timestamptz`;
  const latency = sql`extract(epoch from (confirmed_at - submitted_at))`;
  // The day's confirmations from their partial index; each looks its withdrawal up by primary key
  // in a scalar subquery (a SubPlan, never flattened into a join): with real statistics the
  // planner otherwise hashed the whole operations table against them (200,000 rows: 100 ms).
  const confirmedToday = sql`from (
        select t.created_at as confirmed_at,
          (select o.created_at from operations o
            where o.tenant_id = t.tenant_id and o.operation_id = t.operation_id and o.kind = 'withdrawal') as submitted_at
        from operation_transitions t
        where t.tenant_id = ${tenantId} and t.to_state = 'CONFIRMED' and t.created_at >= ${since}
        offset 0
      ) confirmed
      where submitted_at is not null`;
  return {
    open: sql`select state, asset_code, count(*)::int as withdrawals, sum(amount_minor)::text as amount_minor
      from operations
      where tenant_id = ${tenantId} and kind = 'withdrawal' and state in (${list(HOLDING_STATES)})
      group by state, asset_code`,
    hourly: sql`select to_char(date_trunc('hour', created_at at time zone 'UTC'), 'YYYY-MM-DD"T"HH24:00:00"Z"') as hour,
        state, count(*)::int as withdrawals
      from operations
      where tenant_id = ${tenantId} and kind = 'withdrawal' and created_at >= ${since}
      group by 1, 2`,
    oldestAwaitingApproval: sql`select operation_id, reference, created_at::text as since,
        floor(extract(epoch from (${at} - created_at)))::int as age_seconds
      from operations
      where tenant_id = ${tenantId} and kind = 'withdrawal' and state = 'REQUESTED'
      order by created_at, operation_id
      limit 1`,
    // One pass over the day's confirmations: per hour, and (ROLLUP's row with a null hour) the day.
    latency: sql`select to_char(date_trunc('hour', confirmed_at at time zone 'UTC'), 'YYYY-MM-DD"T"HH24:00:00"Z"') as hour,
        count(*)::int as confirmed,
        percentile_cont(0.5) within group (order by ${latency}) as p50,
        percentile_cont(0.95) within group (order by ${latency}) as p95
      ${confirmedToday}
      group by rollup (1)`,
    openBreaks: sql`select count(*)::int as breaks from reconciliation_breaks
      where tenant_id = ${tenantId} and status = 'open'`,
    deadWorkItems: sql`select count(*)::int as dead from work_items
      where tenant_id = ${tenantId} and status = 'dead'`,
    deadDeliveries: sql`select count(*)::int as dead from webhook_deliveries
      where tenant_id = ${tenantId} and status = 'dead'`,
    lastFinishedRun: sql`select run_id, finished_at from reconciliation_runs
      where tenant_id = ${tenantId} and status = 'finished'
      order by started_at desc
      limit 1`,
  } satisfies Record<string, SQL>;
}

async function rows<T>(tx: Tx, statement: SQL): Promise<T[]> {
  return rowsOf<T>(await tx.execute(statement));
}

const toNumber = (value: unknown): number | null =>
  value === null || value === undefined ? null : Number(value);

/**
 * What an operator looks at first, for one tenant, in the caller's tenant transaction.
 * Amounts stay exact (numeric summed in PostgreSQL, carried as text); no live chain balance is
 * invented: the hot-wallet figure is what the last finished balance reconciliation observed, or
 * null.
 */
export async function computeOverview(tx: Tx, tenantId: string, now = new Date()): Promise<Overview> {
  const statements = overviewStatements(tenantId, now);
  const open = await rows<{
    state: OperationState;
    asset_code: string;
    withdrawals: number;
    amount_minor: string;
  }>(tx, statements.open);
  const openByState = new Map<OperationState, number>();
  const held = new Map<string, { heldMinor: bigint; withdrawals: number }>();
  const outflow = new Map<string, bigint>();
  for (const row of open) {
    const count = Number(row.withdrawals);
    const amount = BigInt(row.amount_minor);
    openByState.set(row.state, (openByState.get(row.state) ?? 0) + count);
    const asset = held.get(row.asset_code) ?? { heldMinor: 0n, withdrawals: 0 };
    held.set(row.asset_code, { heldMinor: asset.heldMinor + amount, withdrawals: asset.withdrawals + count });
    if (OUTFLOW_STATES.includes(row.state))
      outflow.set(row.asset_code, (outflow.get(row.asset_code) ?? 0n) + amount);
  }

  const hourly = await rows<{ hour: string; state: OperationState; withdrawals: number }>(
    tx,
    statements.hourly,
  );
  const latencyRows = await rows<{ hour: string | null; confirmed: number; p50: unknown; p95: unknown }>(
    tx,
    statements.latency,
  );
  const day = latencyRows.find((row) => row.hour === null);
  const latencyHourly = latencyRows.flatMap((row) => (row.hour === null ? [] : [{ ...row, hour: row.hour }]));
  const [approval] = await rows<{
    operation_id: string;
    reference: string;
    since: string;
    age_seconds: number;
  }>(tx, statements.oldestAwaitingApproval);
  const oldest: Overview['oldest'] = [
    approval
      ? {
          queue: 'AWAITING_APPROVAL',
          operationId: approval.operation_id,
          reference: approval.reference,
          since: new Date(approval.since).toISOString(),
          ageSeconds: Math.max(0, Number(approval.age_seconds)),
        }
      : { queue: 'AWAITING_APPROVAL', operationId: null, reference: null, since: null, ageSeconds: null },
  ];
  // The attention queues' own definition of "since": when the withdrawal entered its state.
  for (const state of ['UNKNOWN', 'BROADCAST'] as const) {
    const [first] = (await listAttentionQueue(tx, tenantId, { state, limit: 1 })).items;
    oldest.push(
      first
        ? {
            queue: state,
            operationId: first.operationId,
            reference: first.reference,
            since: first.stateSince,
            ageSeconds: first.stateAgeSeconds,
          }
        : { queue: state, operationId: null, reference: null, since: null, ageSeconds: null },
    );
  }

  const [breaks] = await rows<{ breaks: number }>(tx, statements.openBreaks);
  const [deadWork] = await rows<{ dead: number }>(tx, statements.deadWorkItems);
  const [deadDeliveries] = await rows<{ dead: number }>(tx, statements.deadDeliveries);

  const [run] = await rows<{ run_id: string; finished_at: string }>(tx, statements.lastFinishedRun);
  const figures = run
    ? await rows<{ place: string; asset_code: string; observed_minor: string | null; pinned_block: unknown }>(
        tx,
        sql`select place, asset_code, observed_minor::text as observed_minor, pinned_block
          from reconciliation_run_figures where tenant_id = ${tenantId} and run_id = ${run.run_id}`,
      )
    : [];
  const configured = await rows<{ code: string; network: string; wallet: boolean }>(
    tx,
    sql`select a.code, a.network, exists (select 1 from hot_wallets w
          where w.tenant_id = a.tenant_id and w.network = a.network) as wallet
        from assets a where a.tenant_id = ${tenantId} order by a.code`,
  );
  const hotWallets: Overview['hotWallets'] = configured.map((asset) => {
    const figure = figures.find((f) => f.place === `chain:${asset.network}` && f.asset_code === asset.code);
    const observed = figure?.observed_minor ?? null;
    return {
      asset: asset.code,
      network: asset.network,
      walletConfigured: Boolean(asset.wallet),
      pendingOutflowMinor: (outflow.get(asset.code) ?? 0n).toString(),
      observedMinor: observed,
      observedAt: observed !== null && run ? new Date(run.finished_at).toISOString() : null,
      observedBlock: observed !== null ? toNumber(figure?.pinned_block) : null,
    };
  });

  return {
    generatedAt: now.toISOString(),
    openByState: HOLDING_STATES.filter((state) => openByState.has(state)).map((state) => ({
      state,
      count: openByState.get(state) ?? 0,
    })),
    hourly: hourly
      .map((row) => ({ hour: row.hour, state: row.state, count: Number(row.withdrawals) }))
      .sort((a, b) => a.hour.localeCompare(b.hour) || a.state.localeCompare(b.state)),
    held: [...held.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([asset, value]) => ({
        asset,
        heldMinor: value.heldMinor.toString(),
        withdrawals: value.withdrawals,
      })),
    oldest,
    latency: {
      confirmed: Number(day?.confirmed ?? 0),
      p50Seconds: toNumber(day?.p50),
      p95Seconds: toNumber(day?.p95),
      hourly: latencyHourly
        .map((row) => ({
          hour: row.hour,
          confirmed: Number(row.confirmed),
          p50Seconds: Number(row.p50),
          p95Seconds: Number(row.p95),
        }))
        .sort((a, b) => a.hour.localeCompare(b.hour)),
    },
    openBreaks: Number(breaks?.breaks ?? 0),
    hotWallets,
    deadLettered: { workItems: Number(deadWork?.dead ?? 0), deliveries: Number(deadDeliveries?.dead ?? 0) },
  };
}
