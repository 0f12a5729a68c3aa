import { z } from 'zod';
import { cursorSchema } from './paging.ts';

/** One staff action in the audit log, as the staff screens and exports show it. */
export const auditEntrySchema = z.object({
  entryId: z.uuid(),
  at: z.string(),
  actor: z.string(),
  action: z.string(),
  outcome: z.string(),
  sourceAddress: z.string().nullable(),
  requestId: z.string().nullable(),
  details: z.unknown(),
});
export type AuditEntry = z.infer<typeof auditEntrySchema>;

export const auditListInputSchema = z.strictObject({
  actor: z.string().min(1).max(200).optional(),
  action: z.string().min(1).max(100).optional(),
  outcome: z.string().min(1).max(50).optional(),
  from: z.iso.datetime({ offset: true }).optional(),
  to: z.iso.datetime({ offset: true }).optional(),
  cursor: cursorSchema.optional(),
  limit: z.number().int().min(1).max(500).default(100),
});
export type AuditListInput = z.input<typeof auditListInputSchema>;

/** An export is the filter without paging: at most this many rows, newest first. */
export const AUDIT_EXPORT_MAX = 10_000;
export const auditExportInputSchema = auditListInputSchema.omit({ cursor: true, limit: true });
