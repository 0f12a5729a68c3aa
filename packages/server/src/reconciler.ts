import type { Database } from '@idem/core';
import { type BalanceRunReport, type RailRegistry, reconcileBalances } from '@idem/workers';
import type { Logger } from 'pino';

/**
 * Runs a balance-level reconciliation on demand (the staff button): the same comparison the
 * workers run on their schedule, recorded as run by the staff member who asked.
 */
export interface BalanceReconciler {
  run(tenantId: string, ranBy: string): Promise<BalanceRunReport>;
}

export function railReconciler(db: Database, rails: RailRegistry, log: Logger): BalanceReconciler {
  return {
    run: (tenantId, ranBy) =>
      reconcileBalances({ db, rails, log }, tenantId, { ranBy, trigger: 'on_demand' }),
  };
}
