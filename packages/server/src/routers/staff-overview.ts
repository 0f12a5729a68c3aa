import {
  explorerExportOutputSchema,
  explorerFilterSchema,
  explorerListInputSchema,
  explorerPageSchema,
  overviewSchema,
  staffNotificationViewSchema,
} from '@idem/contracts';
import { computeOverview, exploreWithdrawals, exportWithdrawals, listNotifications } from '@idem/core';
import { stringify } from 'csv-stringify/sync';
import { z } from 'zod';
import { staffWith } from '../auth/procedures.ts';
import { router } from '../trpc.ts';
import { neutraliseFormula } from './staff-audit.ts';

/** The export's columns: exact minor units as digits (a spreadsheet must not turn them into floats). */
const WITHDRAWAL_CSV_COLUMNS = [
  'createdAt',
  'updatedAt',
  'operationId',
  'reference',
  'accountId',
  'asset',
  'network',
  'amountMinor',
  'feeCapMinor',
  'destination',
  'memo',
  'state',
  'rejectionCode',
  'txHash',
  'custodianTransferId',
  'custodianTxHash',
];

/**
 * The operator's Overview and the Withdrawals explorer, for every staff role: reading
 * them is what support does. The export is a mutation so that the audit log records who exported
 * what filter (and the session's CSRF token is needed).
 */
export const staffOverviewRouter = router({
  /** What the signed-in member was told about control changes, newest first (admins are told). */
  notifications: staffWith('read')
    .output(z.array(staffNotificationViewSchema))
    .query(({ ctx }) => ctx.inTenant((tx) => listNotifications(tx, ctx.tenantId, ctx.actor))),

  overview: staffWith('read')
    .output(overviewSchema)
    .query(({ ctx }) => ctx.inTenant((tx) => computeOverview(tx, ctx.tenantId))),

  withdrawals: staffWith('read')
    .input(explorerListInputSchema)
    .output(explorerPageSchema)
    .query(({ ctx, input }) => ctx.inTenant((tx) => exploreWithdrawals(tx, ctx.tenantId, input))),

  exportWithdrawals: staffWith('read')
    .input(explorerFilterSchema)
    .output(explorerExportOutputSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant(async (tx) => {
        const { items, truncated } = await exportWithdrawals(tx, ctx.tenantId, input);
        const csv = stringify(items, {
          header: true,
          columns: WITHDRAWAL_CSV_COLUMNS,
          cast: { string: neutraliseFormula },
        });
        return { csv, rows: items.length, truncated };
      }),
    ),
});
