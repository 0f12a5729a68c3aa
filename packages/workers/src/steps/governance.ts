import { applyDueControlChanges, withTenant } from '@idem/core';
import type { WorkerContext } from '../context.ts';

/** How often each tenant's due control changes are applied: a change is late by at most this. */
export const GOVERNANCE_RUN_EVERY_MS = 60_000;

/**
 * The governance executor: applies the tenant's approved control changes whose delay has passed
 * (each only if its approvals still count) and marks expired proposals, in one transaction
 * (core/src/proposals/control.ts). A worker step rather than at read time: the controls it changes
 * are read in many places (the risk review inside the database's batched creation, the team, the
 * proposals), and a change must take effect on time whether or not anyone reads it.
 */
export async function applyGovernance(ctx: WorkerContext, tenantId: string): Promise<number> {
  const ran = await withTenant(ctx.db, tenantId, (tx) => applyDueControlChanges(tx, tenantId));
  if (ran.applied + ran.refused > 0) ctx.log.info({ tenantId, ...ran }, 'control changes applied');
  return ran.applied;
}
