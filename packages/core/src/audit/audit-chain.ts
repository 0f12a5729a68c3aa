import { createHash } from 'node:crypto';
import type { AuditChainBreak, AuditChainReport } from '@idem/contracts';
import { sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';

/** The previous hash of a tenant's first audit row. */
export const AUDIT_GENESIS_HASH = '0'.repeat(64);

/** Rows read per round trip while walking a chain. */
const VERIFY_PAGE_ROWS = 1000;

/** One audit row as the chain hashes it: every field as text, `details` as PostgreSQL's jsonb text. */
export interface AuditChainRow {
  tenantId: string;
  entryId: string;
  position: string;
  /** UTC with microseconds: 2026-12-03T07:25:50.123456Z. */
  at: string;
  actor: string;
  action: string;
  outcome: string;
  sourceAddress: string | null;
  requestId: string | null;
  details: string;
  prevHash: string;
  hash: string;
}

/** UTF-8 byte order is code-point order: the key order of the canonical JSON. */
const byCodePoint = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/**
 * The hash a row must carry, computed here from its fields and previous hash, independently of
 * the database function that wrote it (core/sql/idem_audit_entry_hash.sql): sha256 of the
 * canonical JSON (keys in code-point order, no spaces, string values) of those fields.
 */
export function auditEntryHash(row: Omit<AuditChainRow, 'hash'>): string {
  const fields: Record<string, string | null> = {
    action: row.action,
    actor: row.actor,
    at: row.at,
    details: row.details,
    entryId: row.entryId,
    outcome: row.outcome,
    position: row.position,
    prevHash: row.prevHash,
    requestId: row.requestId,
    sourceAddress: row.sourceAddress,
    tenantId: row.tenantId,
  };
  const canonical = `{${Object.keys(fields)
    .sort(byCodePoint)
    .map((key) => `${JSON.stringify(key)}:${JSON.stringify(fields[key] ?? null)}`)
    .join(',')}}`;
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}

/**
 * Walks one tenant's audit chain in order and reports the first row that does not hold (its id,
 * position, which check, expected and found), or the number of rows and the head hash. Runs in the
 * caller's tenant-scoped transaction; reads the rows a page at a time.
 */
export async function verifyAuditChain(tx: Tx, tenantId: string): Promise<AuditChainReport> {
  const [head] = rowsOf<{ position: string; hash: string }>(
    await tx.execute(
      sql`select position::text as position, hash from audit_chain_heads where tenant_id = ${tenantId}`,
    ),
  );
  let previousHash = AUDIT_GENESIS_HASH;
  let checked = 0;
  const report = (found: AuditChainBreak | null): AuditChainReport => ({
    tenantId,
    ok: found === null,
    entries: checked,
    headHash: previousHash,
    break: found,
  });
  for (;;) {
    const page = await chainPage(tx, tenantId, checked);
    for (const row of page) {
      const found = rowBreak(row, checked + 1, previousHash);
      if (found) return report(found);
      previousHash = row.hash;
      checked += 1;
    }
    if (page.length < VERIFY_PAGE_ROWS) break;
  }
  const headPosition = head ? Number(head.position) : 0;
  const headHash = head?.hash ?? AUDIT_GENESIS_HASH;
  if (headPosition !== checked || headHash !== previousHash) {
    return report({
      entryId: null,
      position: headPosition,
      check: 'head',
      expected: `position ${headPosition}, hash ${headHash}`,
      found: `position ${checked}, hash ${previousHash}`,
    });
  }
  return report(null);
}

/** The first check one row fails, in order: its link to the row before, its position, its own hash. */
function rowBreak(row: AuditChainRow, position: number, previousHash: string): AuditChainBreak | null {
  const at = { entryId: row.entryId, position: Number(row.position) };
  if (row.prevHash !== previousHash) {
    return { ...at, check: 'link', expected: previousHash, found: row.prevHash };
  }
  if (row.position !== String(position)) {
    return { ...at, check: 'position', expected: String(position), found: row.position };
  }
  const computed = auditEntryHash(row);
  if (computed !== row.hash) return { ...at, check: 'hash', expected: computed, found: row.hash };
  return null;
}

/** The rows after the first `after` positions, in chain order. */
async function chainPage(tx: Tx, tenantId: string, after: number): Promise<AuditChainRow[]> {
  return rowsOf<AuditChainRow>(
    await tx.execute(sql`
      select tenant_id::text as "tenantId", entry_id::text as "entryId",
             chain_position::text as position,
             to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at,
             actor, action, outcome, source_address as "sourceAddress", request_id as "requestId",
             details::text as details, prev_hash as "prevHash", hash
        from audit_log
       where tenant_id = ${tenantId} and chain_position > ${after}
       order by chain_position
       limit ${VERIFY_PAGE_ROWS}`),
  );
}
