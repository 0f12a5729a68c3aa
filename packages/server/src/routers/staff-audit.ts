import {
  auditChainReportSchema,
  auditEntrySchema,
  auditExportInputSchema,
  auditListInputSchema,
} from '@idem/contracts';
import { exportAudit, listAudit, verifyAuditChain } from '@idem/core';
import { stringify } from 'csv-stringify/sync';
import { z } from 'zod';
import { staffWith } from '../auth/procedures.ts';
import { router } from '../trpc.ts';

const AUDIT_CSV_COLUMNS = [
  'at',
  'actor',
  'action',
  'outcome',
  'sourceAddress',
  'requestId',
  'entryId',
  'details',
];

/**
 * A cell a spreadsheet would run as a formula (CSV injection: `=HYPERLINK(...)` in an e-mail tried
 * at sign-in) is kept as text.
 */
export function neutraliseFormula(value: string): string {
  return /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
}

/**
 * The staff audit log, for administrators: every staff action with who, when, from
 * which address and what was asked, filterable, and exportable as CSV. The export is a mutation so
 * that it is itself audited (and needs the session's CSRF token).
 */
export const staffAuditRouter = router({
  list: staffWith('administer')
    .input(auditListInputSchema)
    .output(z.object({ items: z.array(auditEntrySchema), nextCursor: z.string().nullable() }))
    .query(({ ctx, input }) => ctx.inTenant((tx) => listAudit(tx, ctx.tenantId, input))),

  export: staffWith('administer')
    .input(auditExportInputSchema)
    .output(z.object({ csv: z.string(), rows: z.number().int(), truncated: z.boolean() }))
    .mutation(({ ctx, input }) =>
      ctx.inTenant(async (tx) => {
        const { items, truncated } = await exportAudit(tx, ctx.tenantId, input);
        const csv = stringify(
          items.map((entry) => ({ ...entry, details: JSON.stringify(entry.details) })),
          { header: true, columns: AUDIT_CSV_COLUMNS, cast: { string: neutraliseFormula } },
        );
        return { csv, rows: items.length, truncated };
      }),
    ),

  /**
   * Walks the tenant's audit chain as `idem audit verify --tenant` does: the entries and head hash,
   * or the first row that does not hold. A read: it changes nothing and is not itself logged.
   */
  verify: staffWith('administer')
    .input(z.strictObject({}).optional())
    .output(auditChainReportSchema)
    .query(({ ctx }) => ctx.inTenant((tx) => verifyAuditChain(tx, ctx.tenantId))),
});
