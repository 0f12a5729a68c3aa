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

/**
 * Where a tenant's audit chain first fails to hold: the row (null when the chain's last rows are
 * gone and only the head remembers them), its position, which check failed and what it found.
 * `link`: its previous-hash is not the hash of the row before it (a row before it was removed, or
 * that row's hash rewritten); `position`: its place in the chain is not the next one; `hash`: its
 * fields do not hash to the hash it carries (a field was edited); `head`: the last row is not the
 * one the chain head names (rows at the end were removed).
 */
export const auditChainBreakSchema = z.object({
  entryId: z.uuid().nullable(),
  position: z.number().int(),
  check: z.enum(['link', 'position', 'hash', 'head']),
  expected: z.string(),
  found: z.string(),
});
export type AuditChainBreak = z.infer<typeof auditChainBreakSchema>;

/** The result of walking one tenant's audit chain: the rows checked, the head hash, or the first break. */
export const auditChainReportSchema = z.object({
  tenantId: z.uuid(),
  ok: z.boolean(),
  entries: z.number().int(),
  headHash: z.string(),
  break: auditChainBreakSchema.nullable(),
});
export type AuditChainReport = z.infer<typeof auditChainReportSchema>;
