import { IdemError, type OperationKind, type OperationState, type OperationView } from '@idem/contracts';
import { and, asc, desc, eq, getTableColumns, type SQL, sql } from 'drizzle-orm';
import type { Executor } from '../db/connect.ts';
import { assets, operations } from '../db/schema/index.ts';
import { type Operation, toView } from '../operations/operation-record.ts';
import { decodeCursor, encodeCursor } from './page-cursor.ts';

export const LIST_LIMIT_MAX = 100;

type PageOptions = {
  cursor?: string | undefined;
  limit: number;
  oldestFirst?: boolean;
  /** Order by amount first (then time and id), the explorer's "amount" sort. */
  byAmount?: boolean;
  /** A bound above LIST_LIMIT_MAX, for an export (never for a request's own `limit`). */
  limitMax?: number;
};

/**
 * The query of one page of operations matching `conditions`, newest first (or oldest first),
 * keyed on (created_at, operation_id) so pages stay stable while new operations arrive. The
 * position is compared as a row value against PostgreSQL's own text of created_at (microseconds
 * kept), so an index on (..., created_at, operation_id) serves the page as a range scan and no row
 * created within the millisecond of a page boundary is skipped. `byAmount` puts the amount first in
 * both the order and the position (the cursor then carries it). Unexecuted, so a test can EXPLAIN it.
 */
export function operationPageQuery(tx: Executor, conditions: SQL[], options: PageOptions) {
  const limit = pageLimit(options);
  const where = [...conditions];
  const oldestFirst = options.oldestFirst === true;
  const byAmount = options.byAmount === true;
  if (options.cursor) {
    const { at, id, amountMinor } = decodeCursor(options.cursor);
    if (byAmount !== (amountMinor !== undefined)) {
      throw new IdemError('VALIDATION', 'cursor is not one this API returned for this sort', {
        issues: [{ path: 'cursor', message: 'cursor of another sort' }],
      });
    }
    const position = byAmount
      ? sql`(${amountMinor}::numeric, ${at}::timestamptz, ${id}::uuid)`
      : sql`(${at}::timestamptz, ${id}::uuid)`;
    const row = byAmount
      ? sql`(${operations.amountMinor}, ${operations.createdAt}, ${operations.operationId})`
      : sql`(${operations.createdAt}, ${operations.operationId})`;
    where.push(oldestFirst ? sql`${row} > ${position}` : sql`${row} < ${position}`);
  }
  const direction = oldestFirst ? asc : desc;
  const order = [
    ...(byAmount ? [direction(operations.amountMinor)] : []),
    direction(operations.createdAt),
    direction(operations.operationId),
  ];
  return tx
    .select({ ...getTableColumns(operations), createdAtText: sql<string>`${operations.createdAt}::text` })
    .from(operations)
    .where(and(...where))
    .orderBy(...order)
    .limit(limit + 1);
}

function pageLimit(options: PageOptions): number {
  return Math.min(Math.max(1, Math.trunc(options.limit)), options.limitMax ?? LIST_LIMIT_MAX);
}

/** One page of operations (see `operationPageQuery`); the cursor is opaque to callers. */
export async function pageOperations(
  tx: Executor,
  conditions: SQL[],
  options: PageOptions,
): Promise<{ items: Operation[]; nextCursor: string | null }> {
  const limit = pageLimit(options);
  const rows = await operationPageQuery(tx, conditions, options);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const nextCursor =
    rows.length > limit && last
      ? encodeCursor(
          last.createdAtText,
          last.operationId,
          options.byAmount === true ? last.amountMinor : undefined,
        )
      : null;
  return { items: page.map(({ createdAtText: _, ...op }) => op as Operation), nextCursor };
}

/** A page of one tenant's operations of a kind, newest first, optionally in one state. */
export async function listOperations(
  db: Executor,
  tenantId: string,
  options: {
    kind: OperationKind;
    state?: OperationState;
    /** One customer account's operations only. */
    accountRef?: string;
    cursor?: string;
    limit: number;
  },
): Promise<{ items: OperationView[]; nextCursor: string | null }> {
  const page = await pageOperations(db, operationListConditions(tenantId, options), options);
  return { items: page.items.map(toView), nextCursor: page.nextCursor };
}

/**
 * The filter of `listOperations` (withdrawals.list, deposits.list, REST GET /v1/withdrawals), as
 * its own value so a test EXPLAINs exactly what the API runs. Each combination has an index whose
 * leading columns are these equalities followed by (created_at, operation_id): `operations_page_kind`,
 * `operations_page_kind_state`, `operations_page_account`.
 */
export function operationListConditions(
  tenantId: string,
  options: { kind: OperationKind; state?: OperationState; accountRef?: string },
): SQL[] {
  const conditions: SQL[] = [eq(operations.tenantId, tenantId), eq(operations.kind, options.kind)];
  if (options.state) conditions.push(eq(operations.state, options.state));
  if (options.accountRef !== undefined) conditions.push(eq(operations.accountRef, options.accountRef));
  return conditions;
}

export interface AssetView {
  code: string;
  network: string;
  decimals: number;
  confirmations: number;
}

/** The assets a tenant has configured, by code. */
export async function listAssets(db: Executor, tenantId: string): Promise<AssetView[]> {
  return db
    .select({
      code: assets.code,
      network: assets.network,
      decimals: assets.decimals,
      confirmations: assets.confirmations,
    })
    .from(assets)
    .where(eq(assets.tenantId, tenantId))
    .orderBy(assets.code);
}
