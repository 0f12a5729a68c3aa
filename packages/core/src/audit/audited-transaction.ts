import { IdemError } from '@idem/contracts';
import { sql } from 'drizzle-orm';
import type { Database, Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { withTenant } from '../db/tenant-scope.ts';
import { type AuditRecord, recordAudit } from './audit-log.ts';

/**
 * When a successful transaction records its `ok`: `always`; only when it `wrote` something (a
 * read that precedes the action's deciding transaction records nothing, so a refusal that follows
 * it is not preceded by an `ok`); or `never` (the action's `ok` is already recorded).
 */
export type AuditOkWhen = 'always' | 'wrote' | 'never';

/** What one audited transaction did: its value and whether it recorded `ok`, or the refusal it recorded. */
export type AuditedResult<T> =
  | { outcome: 'ok'; value: T; recorded: boolean }
  | { outcome: 'refused'; error: IdemError };

/**
 * Runs one staff action's transaction in the tenant's scope and records its audit entry at the
 * write that decides it, in that same transaction. The work runs inside a savepoint: when it
 * refuses (throws an IdemError), the savepoint undoes whatever it wrote, the entry records the
 * refusal's code, and that entry commits; the refusal is returned, for the caller to throw. So a
 * refusal is recorded as what it was by the transaction that decided it, never inferred afterwards. Any other error rolls everything back and is rethrown unrecorded (the caller
 * records it on its own, since nothing was decided).
 */
export async function runAudited<T>(
  db: Database,
  tenantId: string,
  audit: {
    entry: (outcome: string) => Promise<AuditRecord> | AuditRecord;
    okWhen: AuditOkWhen;
    /**
     * A refusal the work came to while keeping what it wrote (a decision that marks its proposal
     * EXPIRED): the transaction commits, the entry records the refusal's code, never `ok`.
     */
    refusalOf?: (value: T) => IdemError | null;
  },
  work: (tx: Tx) => Promise<T>,
): Promise<AuditedResult<T>> {
  return withTenant(db, tenantId, async (tx) => {
    let value: T;
    try {
      value = await tx.transaction((savepoint) => work(savepoint));
    } catch (error) {
      if (!(error instanceof IdemError)) throw error;
      await recordAudit(tx, await audit.entry(error.code));
      return { outcome: 'refused', error };
    }
    const kept = audit.refusalOf?.(value) ?? null;
    if (kept) {
      await recordAudit(tx, await audit.entry(kept.code));
      return { outcome: 'refused', error: kept };
    }
    const record = audit.okWhen === 'always' || (audit.okWhen === 'wrote' && (await transactionWrote(tx)));
    if (record) await recordAudit(tx, await audit.entry('ok'));
    return { outcome: 'ok', value, recorded: record };
  });
}

/** Throws a recorded refusal, or returns the value. */
export function settled<T>(result: AuditedResult<T>): T {
  if (result.outcome === 'refused') throw result.error;
  return result.value;
}

/** Whether this transaction has written anything yet: PostgreSQL assigns an id only to one that writes or locks rows. */
async function transactionWrote(tx: Tx): Promise<boolean> {
  const [row] = rowsOf<{ wrote: boolean }>(
    await tx.execute(sql`select pg_current_xact_id_if_assigned() is not null as wrote`),
  );
  return row?.wrote === true;
}
