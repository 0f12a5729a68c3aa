import { checkFreezeTrips, withTenant } from '@idem/core';
import type { WorkerContext } from '../context.ts';

/** How often every tenant's trips are measured when it has no work (docs/GOVERNANCE.md). */
export const FREEZE_TRIPS_RUN_EVERY_MS = 60_000;

/**
 * The automatic freeze trips (docs/GOVERNANCE.md "Automatic trips"): measures the tenant's trips
 * and freezes what crossed a threshold (core checkFreezeTrips; one freeze per trip, whatever number
 * of workers check at once). A freeze made here is an ALERT: it stops the tenant's or an asset's
 * sends until other admins lift it. Run in every pass of a tenant with work, before the sends and
 * after the stages that move withdrawals to UNKNOWN or FAILED_TERMINAL, and periodically for all.
 */
export async function checkTrips(ctx: WorkerContext, tenantId: string): Promise<number> {
  const fired = await withTenant(ctx.db, tenantId, (tx) => checkFreezeTrips(tx, tenantId));
  for (const firing of fired) {
    ctx.log.error(
      {
        alert: true,
        tenantId,
        trip: firing.trip,
        scope: firing.scope,
        assetCode: firing.assetCode ?? undefined,
        freezeId: firing.freezeId,
        reason: firing.reason,
      },
      'ALERT automatic freeze tripped',
    );
  }
  return fired.length;
}
