import {
  getRunInputSchema,
  IdemError,
  listRunsInputSchema,
  reconciliationRunDetailSchema,
  reconciliationRunSchema,
  runHistoryPointSchema,
  runReconciliationInputSchema,
  signedRunReportSchema,
} from '@idem/contracts';
import { getRun, listRuns, runHistory } from '@idem/core';
import { runCsv, signRunReport } from '@idem/workers';
import { z } from 'zod';
import { staffWith } from '../auth/procedures.ts';
import { router } from '../trpc.ts';

const csvExportSchema = z.object({ filename: z.string(), csv: z.string() });

/**
 * Balance-level reconciliation for the staff screens: run now, the runs and their
 * figures, and the two exports an auditor receives (CSV, and JSON signed with the tenant's own
 * outbound-webhook secret). Nothing here adjusts a balance.
 */
export const staffReconciliationRouter = router({
  /** Observes and compares now, as the signed-in staff member; variances open breaks (C21). */
  runNow: staffWith('operate')
    .input(runReconciliationInputSchema)
    .output(reconciliationRunDetailSchema)
    .mutation(async ({ ctx }) => {
      if (!ctx.reconciler)
        throw new IdemError('VALIDATION', 'this server has no chain or custodian to observe');
      const report = await ctx.reconciler.run(ctx.tenantId, ctx.actor);
      return ctx.inTenant((tx) => getRun(tx, { tenantId: ctx.tenantId, runId: report.runId }));
    }),

  runs: staffWith('read')
    .input(listRunsInputSchema)
    .output(z.array(reconciliationRunSchema))
    .query(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        listRuns(tx, { tenantId: ctx.tenantId, ...(input.limit ? { limit: input.limit } : {}) }),
      ),
    ),

  /** Ledger against observed per place and asset over the last runs (the screen's chart). */
  history: staffWith('read')
    .input(listRunsInputSchema)
    .output(z.array(runHistoryPointSchema))
    .query(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        runHistory(tx, { tenantId: ctx.tenantId, ...(input.limit ? { limit: input.limit } : {}) }),
      ),
    ),

  run: staffWith('read')
    .input(getRunInputSchema)
    .output(reconciliationRunDetailSchema)
    .query(({ ctx, input }) =>
      ctx.inTenant((tx) => getRun(tx, { tenantId: ctx.tenantId, runId: input.runId })),
    ),

  exportCsv: staffWith('read')
    .input(getRunInputSchema)
    .output(csvExportSchema)
    .query(async ({ ctx, input }) => {
      const run = await ctx.inTenant((tx) => getRun(tx, { tenantId: ctx.tenantId, runId: input.runId }));
      return { filename: `reconciliation-${run.runId}.csv`, csv: runCsv(run) };
    }),

  /**
   * The run signed by the signer service's own key (or, without a signer service, the tenant's
   * outbound-webhook secret); `idem reconcile verify` checks it.
   */
  exportSigned: staffWith('read')
    .input(getRunInputSchema)
    .output(signedRunReportSchema)
    .query(({ ctx, input }) =>
      signRunReport(ctx.db, ctx.tenantId, input.runId, new Date(), ctx.signerService),
    ),
});
