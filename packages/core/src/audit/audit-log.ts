import { randomUUID } from 'node:crypto';
import {
  AUDIT_EXPORT_MAX,
  type AuditEntry,
  type AuditListInput,
  auditListInputSchema,
  IdemError,
  redactedCopy,
} from '@idem/contracts';
import { and, desc, eq, gte, lt, lte } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { auditLog } from '../db/schema/index.ts';
import { decodeSequenceCursor, encodeSequenceCursor } from '../queries/page-cursor.ts';

export interface AuditRecord {
  tenantId: string;
  actor: string;
  action: string;
  outcome: string;
  sourceAddress?: string | null;
  requestId?: string | null;
  /** What was asked; stored redacted. */
  details?: unknown;
}

/** Appends one staff action to the tenant's audit log, in the caller's transaction. */
export async function recordAudit(tx: Tx, record: AuditRecord): Promise<void> {
  await tx.insert(auditLog).values({
    tenantId: record.tenantId,
    entryId: randomUUID(),
    actor: record.actor,
    action: record.action,
    outcome: record.outcome,
    sourceAddress: record.sourceAddress ?? null,
    requestId: record.requestId ?? null,
    details: redactedCopy(record.details ?? {}) ?? {},
  });
}

/** The tenant's audit log, newest first, filtered by who, what, outcome and time. */
export async function listAudit(
  tx: Tx,
  tenantId: string,
  rawInput: AuditListInput,
  options: { max?: number } = {},
): Promise<{ items: AuditEntry[]; nextCursor: string | null }> {
  const parsed = auditListInputSchema.safeParse(rawInput);
  if (!parsed.success) throw new IdemError('VALIDATION', parsed.error.issues[0]?.message ?? 'invalid filter');
  const input = parsed.data;
  const limit = options.max ?? input.limit;
  const before = input.cursor ? decodeSequenceCursor(input.cursor) : null;
  const rows = await tx
    .select()
    .from(auditLog)
    .where(
      and(
        eq(auditLog.tenantId, tenantId),
        input.actor ? eq(auditLog.actor, input.actor) : undefined,
        input.action ? eq(auditLog.action, input.action) : undefined,
        input.outcome ? eq(auditLog.outcome, input.outcome) : undefined,
        input.from ? gte(auditLog.at, new Date(input.from)) : undefined,
        input.to ? lte(auditLog.at, new Date(input.to)) : undefined,
        before !== null ? lt(auditLog.sequence, before) : undefined,
      ),
    )
    .orderBy(desc(auditLog.sequence))
    .limit(limit + 1);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map((row) => ({
      entryId: row.entryId,
      at: row.at.toISOString(),
      actor: row.actor,
      action: row.action,
      outcome: row.outcome,
      sourceAddress: row.sourceAddress,
      requestId: row.requestId,
      details: row.details,
    })),
    nextCursor: rows.length > limit && last ? encodeSequenceCursor(last.sequence) : null,
  };
}

/** Everything the filter selects, up to the export bound, for a CSV export. */
export async function exportAudit(
  tx: Tx,
  tenantId: string,
  filter: Omit<AuditListInput, 'cursor' | 'limit'>,
) {
  const { items, nextCursor } = await listAudit(tx, tenantId, filter, { max: AUDIT_EXPORT_MAX });
  return { items, truncated: nextCursor !== null };
}
