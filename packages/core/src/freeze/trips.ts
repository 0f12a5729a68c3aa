import { randomUUID } from 'node:crypto';
import {
  type ControlChangeOutcome,
  type FreezeTripFiring,
  type FreezeTripSettings,
  type FreezeTripsView,
  type FreezeTripView,
  freezeTripSettingsSchema,
  IdemError,
} from '@idem/contracts';
import { and, asc, eq, inArray, isNull, sql } from 'drizzle-orm';
import { recordAudit } from '../audit/audit-log.ts';
import type { Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { assets, freezeTrips, proposals } from '../db/schema/index.ts';
import { notifyAdmins } from '../governance/notify.ts';
import { SYSTEM_ACCOUNTS } from '../journal/post-entry.ts';
import { parseOrThrow } from '../operations/input-validation.ts';
import { activeMembers, counts } from '../proposals/approvers.ts';
import { proposeControlChange } from '../proposals/control.ts';

/**
 * Automatic trips of the freeze switch (docs/GOVERNANCE.md "Automatic trips"). A tenant sets, for
 * all its assets and optionally per asset: more than N withdrawals becoming UNKNOWN or
 * FAILED_TERMINAL within a window, and an asset's withdrawals sent in the last hour above a share
 * of its custody balance. The workers measure them (checkFreezeTrips) and a threshold crossed
 * inserts a freeze in force, as a member's freeze would be, whose actor names the trip
 * (`system:trip:<name>`). Lifting it is the ordinary `freeze_lift` control change.
 *
 * The settings follow the rule of every control: on, or stricter, applies at once (any admin);
 * off, or looser, is a `freeze_trip_loosen` control change other admins approve, and the database
 * refuses the application role any other loosening (core/sql/idem_guard_freeze_trip_write.sql).
 */

type TripRow = typeof freezeTrips.$inferSelect;

/** The freezes' actor prefix for automatic trips; the partial unique index freezes_one_per_trip keys on it. */
export const TRIP_ACTOR_PREFIX = 'system:trip:';

/** The outflow trip's window: sends of the last hour. */
const OUTFLOW_WINDOW_SECONDS = 3_600;

/** The row's trips as settings (what a control change names and the guard compares). */
function settingsOf(row: TripRow): FreezeTripSettings {
  return {
    assetCode: row.assetCode,
    failuresMax: row.failuresMax,
    failuresWindowSeconds: row.failuresWindowSeconds,
    outflowShareMaxPercent: row.outflowShareMaxPercent,
  };
}

/**
 * Whether `next` loosens the row in force (null: no row, every trip off). A trip turned off, a
 * higher count, a shorter window or a higher share each lets more happen before a freeze, so any
 * one of them makes the whole change a loosening. The database judges the same way.
 */
export function freezeTripLoosens(current: FreezeTripSettings | null, next: FreezeTripSettings): boolean {
  if (!current) return false;
  const failuresLooser =
    current.failuresMax !== null &&
    current.failuresWindowSeconds !== null &&
    (next.failuresMax === null ||
      next.failuresWindowSeconds === null ||
      next.failuresMax > current.failuresMax ||
      next.failuresWindowSeconds < current.failuresWindowSeconds);
  const outflowLooser =
    current.outflowShareMaxPercent !== null &&
    (next.outflowShareMaxPercent === null || next.outflowShareMaxPercent > current.outflowShareMaxPercent);
  return failuresLooser || outflowLooser;
}

async function tripRow(tx: Tx, tenantId: string, assetCode: string | null): Promise<TripRow | null> {
  const [row] = await tx
    .select()
    .from(freezeTrips)
    .where(
      and(
        eq(freezeTrips.tenantId, tenantId),
        assetCode === null ? isNull(freezeTrips.assetCode) : eq(freezeTrips.assetCode, assetCode),
      ),
    );
  return row ?? null;
}

/**
 * An admin sets one row of trips (the tenant's, or one asset's). Stricter or new applies now; looser
 * is proposed as a `freeze_trip_loosen` control change naming the whole new row (the same change
 * asked again while one waits is answered with the waiting proposal).
 */
export async function setFreezeTrip(
  tx: Tx,
  input: { tenantId: string; actor: string; settings: FreezeTripSettings },
): Promise<ControlChangeOutcome & { trip: FreezeTripView | null }> {
  const settings = parseOrThrow(freezeTripSettingsSchema, input.settings);
  if (!counts(await activeMembers(tx, input.tenantId), input.actor, 'administer')) {
    throw new IdemError('FORBIDDEN', 'only an active admin sets the automatic freeze trips');
  }
  if (settings.assetCode !== null) {
    const [asset] = await tx
      .select({ code: assets.code })
      .from(assets)
      .where(and(eq(assets.tenantId, input.tenantId), eq(assets.code, settings.assetCode)));
    if (!asset) throw new IdemError('VALIDATION', `the tenant has no asset ${settings.assetCode}`);
  }
  const current = await tripRow(tx, input.tenantId, settings.assetCode);
  if (!freezeTripLoosens(current ? settingsOf(current) : null, settings)) {
    const trip = await applyFreezeTrip(tx, input.tenantId, settings, input.actor);
    return { outcome: 'APPLIED', proposalId: null, approvalsRequired: null, trip };
  }
  const [open] = await tx
    .select({ proposalId: proposals.proposalId, approvalsRequired: proposals.approvalsRequired })
    .from(proposals)
    .where(
      and(
        eq(proposals.tenantId, input.tenantId),
        eq(proposals.kind, 'control_change'),
        inArray(proposals.state, ['PENDING', 'APPROVED']),
        sql`${proposals.payload} -> 'change' ->> 'control' = 'freeze_trip_loosen'`,
        sql`${proposals.payload} -> 'change' -> 'trip' = ${JSON.stringify(settings)}::jsonb`,
      ),
    );
  const proposal =
    open ??
    (
      await proposeControlChange(tx, {
        tenantId: input.tenantId,
        actor: input.actor,
        change: { control: 'freeze_trip_loosen', trip: settings },
      })
    ).proposal;
  return {
    outcome: 'PROPOSED',
    proposalId: proposal.proposalId,
    approvalsRequired: proposal.approvalsRequired,
    trip: null,
  };
}

/**
 * Writes one row of trips now: a tightening, or the apply step of an approved, due
 * `freeze_trip_loosen` control change (the database refuses a loosening at any other time).
 */
export async function applyFreezeTrip(
  tx: Tx,
  tenantId: string,
  settings: FreezeTripSettings,
  actor: string,
): Promise<FreezeTripView> {
  const values = {
    failuresMax: settings.failuresMax,
    failuresWindowSeconds: settings.failuresWindowSeconds,
    outflowShareMaxPercent: settings.outflowShareMaxPercent,
    updatedBy: actor,
    updatedAt: sql`now()`,
  };
  const [row] = await tx
    .insert(freezeTrips)
    .values({ tenantId, assetCode: settings.assetCode, ...values })
    .onConflictDoUpdate({ target: [freezeTrips.tenantId, freezeTrips.assetCode], set: values })
    .returning();
  if (!row) throw new Error('freeze trip upsert returned no row');
  return view(row, null);
}

/** What a `freeze_trip_loosen` change replaces, as its approvers are shown it. */
export async function freezeTripInForce(
  tx: Tx,
  tenantId: string,
  assetCode: string | null,
): Promise<FreezeTripSettings | null> {
  const row = await tripRow(tx, tenantId, assetCode);
  return row ? settingsOf(row) : null;
}

/** The tenant's trips (the tenant's row first, then per asset), each with its waiting loosening. */
export async function listFreezeTrips(tx: Tx, tenantId: string): Promise<FreezeTripsView> {
  const rows = await tx
    .select()
    .from(freezeTrips)
    .where(eq(freezeTrips.tenantId, tenantId))
    .orderBy(sql`${freezeTrips.assetCode} is not null`, asc(freezeTrips.assetCode));
  const waiting = await tx
    .select({ proposalId: proposals.proposalId, payload: proposals.payload })
    .from(proposals)
    .where(
      and(
        eq(proposals.tenantId, tenantId),
        eq(proposals.kind, 'control_change'),
        inArray(proposals.state, ['PENDING', 'APPROVED']),
        sql`${proposals.payload} -> 'change' ->> 'control' = 'freeze_trip_loosen'`,
      ),
    );
  const waitingFor = new Map<string, string>();
  for (const proposal of waiting) {
    const trip = (proposal.payload as { change?: { trip?: { assetCode?: string | null } } }).change?.trip;
    if (trip) waitingFor.set(trip.assetCode ?? '', proposal.proposalId);
  }
  return { trips: rows.map((row) => view(row, waitingFor.get(row.assetCode ?? '') ?? null)) };
}

function view(row: TripRow, pendingLoosenProposalId: string | null): FreezeTripView {
  return {
    ...settingsOf(row),
    updatedBy: row.updatedBy,
    updatedAt: row.updatedAt.toISOString(),
    pendingLoosenProposalId,
  };
}

interface Crossing {
  trip: string;
  scope: 'tenant' | 'asset';
  assetCode: string | null;
  reason: string;
}

/**
 * Measures every trip the tenant set and freezes what crossed its threshold. Safe to run from many
 * workers at once: a trip's freeze is one conditional insert, and the partial unique index
 * freezes_one_per_trip lets one freeze per trip be in force, so a second check that crossed the same
 * threshold inserts nothing (it waits for the first to commit, then finds the freeze). Each trip
 * counts from its window's start or from the last lift of its own freeze, whichever is later:
 * what the admins reviewed and released does not freeze again by itself. Returns the freezes this
 * call made; each also tells every admin (notifyAdmins), in the same transaction.
 */
export async function checkFreezeTrips(tx: Tx, tenantId: string): Promise<FreezeTripFiring[]> {
  const rows = await tx.select().from(freezeTrips).where(eq(freezeTrips.tenantId, tenantId));
  if (rows.length === 0) return [];
  const crossings: Crossing[] = [];
  for (const row of rows) {
    if (row.failuresMax !== null && row.failuresWindowSeconds !== null) {
      const crossing = await measureFailures(
        tx,
        tenantId,
        row.assetCode,
        row.failuresMax,
        row.failuresWindowSeconds,
      );
      if (crossing) crossings.push(crossing);
    }
    if (row.outflowShareMaxPercent !== null) {
      const assetCodes =
        row.assetCode !== null
          ? [row.assetCode]
          : (await tx.select({ code: assets.code }).from(assets).where(eq(assets.tenantId, tenantId))).map(
              (asset) => asset.code,
            );
      for (const assetCode of assetCodes) {
        const crossing = await measureOutflow(tx, tenantId, assetCode, row.outflowShareMaxPercent);
        if (crossing) crossings.push(crossing);
      }
    }
  }
  const fired: FreezeTripFiring[] = [];
  // The tenant row and an asset's row may both cross one asset's outflow: one freeze per trip name.
  const seen = new Set<string>();
  for (const crossing of crossings) {
    if (seen.has(crossing.trip)) continue;
    seen.add(crossing.trip);
    const freezeId = await insertTripFreeze(tx, tenantId, crossing);
    if (!freezeId) continue;
    await notifyAdmins(tx, tenantId, {
      topic: 'freeze_tripped',
      proposalId: null,
      message: `Automatic freeze (${crossing.scope === 'tenant' ? 'the whole tenant' : `asset ${crossing.assetCode}`}): ${crossing.reason}. Lifting it needs another admin's approval.`,
    });
    // In the audit log like a freeze a person made, with the system as its actor.
    await recordAudit(tx, {
      tenantId,
      actor: TRIP_ACTOR_PREFIX + crossing.trip,
      action: 'freeze.trip',
      outcome: 'ok',
      details: { freezeId, scope: crossing.scope, assetCode: crossing.assetCode, reason: crossing.reason },
    });
    fired.push({ ...crossing, freezeId });
  }
  return fired;
}

/** The trip's start: the window's, or the last lift of this trip's own freeze if later. */
function since(actor: string, windowSeconds: number) {
  return sql`greatest(now() - make_interval(secs => ${windowSeconds}),
    coalesce((select max(f.lifted_at) from freezes f
               where f.tenant_id = t.tenant_id and f.frozen_by = ${actor}), '-infinity'::timestamptz))`;
}

async function measureFailures(
  tx: Tx,
  tenantId: string,
  assetCode: string | null,
  failuresMax: number,
  windowSeconds: number,
): Promise<Crossing | null> {
  const trip = assetCode === null ? 'failures' : `failures:${assetCode}`;
  // A transition into the state, not a note written while in it (an owner assigned keeps the
  // state): from_state differs. Each withdrawal counts once however often it went there.
  const [row] = rowsOf<{ failures: number }>(
    await tx.execute(sql`
      select count(distinct tr.operation_id)::int as failures
        from (select ${tenantId}::uuid as tenant_id) t
        join operation_transitions tr on tr.tenant_id = t.tenant_id
        join operations o on o.tenant_id = tr.tenant_id and o.operation_id = tr.operation_id
       where tr.to_state in ('UNKNOWN', 'FAILED_TERMINAL')
         and tr.from_state is distinct from tr.to_state
         and tr.created_at > ${since(TRIP_ACTOR_PREFIX + trip, windowSeconds)}
         and o.kind = 'withdrawal'
         ${assetCode === null ? sql`` : sql`and o.asset_code = ${assetCode}`}`),
  );
  const failures = row?.failures ?? 0;
  if (failures <= failuresMax) return null;
  return {
    trip,
    scope: assetCode === null ? 'tenant' : 'asset',
    assetCode,
    reason: `automatic trip ${trip}: ${failures} withdrawals${assetCode === null ? '' : ` of ${assetCode}`} became UNKNOWN or FAILED_TERMINAL within ${windowSeconds} s, more than the ${failuresMax} allowed`,
  };
}

/**
 * The asset's withdrawals sent within the hour (moved from SIGNED to BROADCAST, or to UNKNOWN when
 * the send's outcome was lost) against the custody balance the ledger holds for the asset: minus
 * the sum of its '@custody' postings, what deposits brought in and confirmed withdrawals took out.
 * The ledger's figure, not an observation: hot_wallets store no balance, and reconciliation's
 * observed balance is as old as its last run and, when fresh, already net of the hour's sends.
 * With nothing in custody any send trips.
 */
async function measureOutflow(
  tx: Tx,
  tenantId: string,
  assetCode: string,
  sharePercent: number,
): Promise<Crossing | null> {
  const trip = `outflow:${assetCode}`;
  const [row] = rowsOf<{ sent: string; custody: string }>(
    await tx.execute(sql`
      select coalesce((select sum(o.amount_minor) from operations o
                        where o.tenant_id = t.tenant_id and o.kind = 'withdrawal' and o.asset_code = ${assetCode}
                          and exists (select 1 from operation_transitions tr
                                       where tr.tenant_id = o.tenant_id and tr.operation_id = o.operation_id
                                         and tr.from_state = 'SIGNED' and tr.to_state in ('BROADCAST', 'UNKNOWN')
                                         and tr.created_at > ${since(TRIP_ACTOR_PREFIX + trip, OUTFLOW_WINDOW_SECONDS)})),
                      0)::text as sent,
             coalesce((select -sum(p.amount) from postings p
                        where p.tenant_id = t.tenant_id and p.asset_code = ${assetCode}
                          and p.account = ${SYSTEM_ACCOUNTS.custody}), 0)::text as custody
        from (select ${tenantId}::uuid as tenant_id) t`),
  );
  const sent = BigInt(row?.sent ?? '0');
  const custody = BigInt(row?.custody ?? '0');
  if (sent === 0n || sent * 100n <= BigInt(sharePercent) * custody) return null;
  const share = custody > 0n ? `${(Number((sent * 10_000n) / custody) / 100).toFixed(2)}% of` : 'more than';
  return {
    trip,
    scope: 'asset',
    assetCode,
    reason: `automatic trip ${trip}: ${sent} minor units of ${assetCode} sent within the hour, ${share} the custody balance of ${custody}, above the ${sharePercent}% allowed`,
  };
}

/** The trip's freeze, unless one of the same trip is in force (then null: nothing inserted). */
async function insertTripFreeze(tx: Tx, tenantId: string, crossing: Crossing): Promise<string | null> {
  const [row] = rowsOf<{ freeze_id: string }>(
    await tx.execute(sql`
      insert into freezes (tenant_id, freeze_id, scope, asset_code, reason, frozen_by)
      values (${tenantId}::uuid, ${randomUUID()}::uuid, ${crossing.scope}, ${crossing.assetCode},
              ${crossing.reason}, ${TRIP_ACTOR_PREFIX + crossing.trip})
      on conflict (tenant_id, frozen_by) where lifted_at is null and frozen_by like 'system:trip:%'
      do nothing
      returning freeze_id::text`),
  );
  return row?.freeze_id ?? null;
}
