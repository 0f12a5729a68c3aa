/**
 * The freeze check (I33-FREEZE, docs/GOVERNANCE.md "Freeze"): while a freeze was in force, nothing
 * under it was newly signed. A first signature of a withdrawal is recorded in the claim's own
 * transaction (its SIGNED transition and its original attempt carry that transaction's start
 * time), so one whose transaction began after the freeze had surely committed and before its lift
 * was claimed under the freeze: a violation. Fee bumps and cancels of what was already broadcast
 * are not held and not counted. A claim begun before the freeze committed (a signature in flight)
 * is counted apart, as the freeze allows it.
 */
import { readFileSync } from 'node:fs';
import type { Sql } from 'postgres';
import type { FreezeWindow } from './freeze-fault.ts';
import type { CheckResult } from './invariants.ts';

export async function nothingSignedWhileFrozen(
  sql: Sql,
  windows: readonly FreezeWindow[],
  /** The signer service's log, when the run has one: its FROZEN refusals are counted. */
  signerLogPath?: string,
): Promise<CheckResult> {
  const id = 'nothing-signed-while-frozen';
  const title = 'no withdrawal under a freeze in force was newly signed (fee bumps and cancels excepted)';
  if (windows.length === 0)
    return { id, title, status: 'not-checkable', detail: 'no freeze was made in this run', violations: [] };
  const violations: string[] = [];
  const details: string[] = [];
  for (const window of windows) {
    const [freeze] = await sql<{ frozen_at: Date; lifted_at: Date | null }[]>`
      select frozen_at, lifted_at from freezes
       where tenant_id = ${window.tenantId}::uuid and freeze_id = ${window.freezeId}::uuid`;
    if (!freeze) {
      violations.push(`freeze ${window.freezeId} is gone from the table`);
      continue;
    }
    // Compared in the database, at its own precision (microseconds), never through a JS Date.
    const under = await sql<{ operation_id: string; what: string; at: Date; in_flight: boolean }[]>`
      with f as (
        select frozen_at, coalesce(lifted_at, 'infinity'::timestamptz) as until,
               ${window.committedBy}::timestamptz as committed_by
          from freezes where tenant_id = ${window.tenantId}::uuid and freeze_id = ${window.freezeId}::uuid),
      scoped as (
        select o.tenant_id, o.operation_id from operations o
         where o.tenant_id = ${window.tenantId}::uuid and o.kind = 'withdrawal'
           and ((${window.scope} = 'asset' and o.asset_code = ${window.assetCode})
             or (${window.scope} = 'account' and o.account_ref = ${window.accountRef}))),
      signed as (
        select s.operation_id, 'SIGNED transition' as what, t.created_at as at
          from scoped s join operation_transitions t using (tenant_id, operation_id)
         where t.to_state = 'SIGNED'
        union all
        select s.operation_id, 'original attempt' as what, a.created_at as at
          from scoped s join signed_attempts a using (tenant_id, operation_id)
         where a.kind = 'original')
      select g.operation_id::text, g.what, g.at, g.at <= f.committed_by as in_flight
        from signed g, f
       where g.at >= f.frozen_at and g.at < f.until
       order by g.at`;
    const inFlight = under.filter((row) => row.in_flight);
    for (const row of under.filter((r) => !r.in_flight))
      violations.push(
        `withdrawal ${row.operation_id}: ${row.what} at ${row.at.toISOString()} under ${window.scope} freeze ${window.freezeId} (committed by ${window.committedBy}, lifted ${freeze.lifted_at?.toISOString() ?? 'never'})`,
      );
    // What it held moved once it was lifted: signed after the lift.
    const [held] = await sql<{ n: number }[]>`
      select count(distinct t.operation_id)::int as n from operation_transitions t
        join operations o using (tenant_id, operation_id)
        join freezes f on f.tenant_id = o.tenant_id and f.freeze_id = ${window.freezeId}::uuid
       where o.tenant_id = ${window.tenantId}::uuid and o.kind = 'withdrawal' and t.to_state = 'SIGNED'
         and t.created_at >= f.lifted_at
         and ((${window.scope} = 'asset' and o.asset_code = ${window.assetCode})
           or (${window.scope} = 'account' and o.account_ref = ${window.accountRef}))`;
    details.push(
      `${window.scope} freeze ${window.freezeId.slice(0, 8)} for ${freeze.lifted_at ? `${freeze.lifted_at.getTime() - freeze.frozen_at.getTime()} ms` : 'the whole run'}: ` +
        `${under.length - inFlight.length} signed under it, ${inFlight.length} in flight at the freeze, ${held?.n ?? 0} signed after its lift`,
    );
  }
  if (signerLogPath)
    details.push(`signer service refused ${frozenRefusals(signerLogPath)} payment(s) as FROZEN`);
  return {
    id,
    title,
    status: violations.length > 0 ? 'fail' : 'pass',
    detail: details.join('; '),
    violations: violations.slice(0, 20),
  };
}

function frozenRefusals(path: string): number {
  try {
    return readFileSync(path, 'utf8')
      .split('\n')
      .filter((line) => line.includes('"outcome":"refused"') && line.includes('"code":"FROZEN"')).length;
  } catch {
    return 0;
  }
}
