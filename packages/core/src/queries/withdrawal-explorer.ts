import {
  EXPLORER_EXPORT_MAX,
  type ExplorerListInput,
  type ExplorerSort,
  explorerFilterSchema,
  explorerListInputSchema,
  type OperationView,
} from '@idem/contracts';
import { eq, gte, lt, lte, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/connect.ts';
import { operations } from '../db/schema/index.ts';
import { toView } from '../operations/operation-record.ts';
import { operationPageQuery, pageOperations } from './list.ts';

type Filter = ReturnType<typeof explorerFilterSchema.parse>;

/**
 * The staff Withdrawals explorer: every withdrawal of the tenant, filtered and sorted,
 * paged by the one keyset pager (`list.ts`). Each filter is an equality or a range on a column an
 * index of `operations` leads with after (tenant, kind), so a page is an index range in its order
 * (core/test/overview.test.ts EXPLAINs them). The destination matches exactly: an address is
 * never searched by prefix.
 */
function conditionsOf(tenantId: string, filter: Filter): SQL[] {
  const where: SQL[] = [eq(operations.tenantId, tenantId), eq(operations.kind, 'withdrawal')];
  if (filter.state) where.push(eq(operations.state, filter.state));
  if (filter.asset) where.push(eq(operations.assetCode, filter.asset));
  if (filter.accountId) where.push(eq(operations.accountRef, filter.accountId));
  if (filter.destination) where.push(eq(operations.destination, filter.destination));
  if (filter.amountMinMinor) where.push(gte(operations.amountMinor, filter.amountMinMinor));
  if (filter.amountMaxMinor) where.push(lte(operations.amountMinor, filter.amountMaxMinor));
  if (filter.from) where.push(gte(operations.createdAt, new Date(filter.from)));
  if (filter.to) where.push(lt(operations.createdAt, new Date(filter.to)));
  return where;
}

function orderOf(sort: ExplorerSort) {
  return { byAmount: sort.startsWith('amount'), oldestFirst: sort.endsWith('_asc') };
}

/** The page's statement, unexecuted, for EXPLAIN. */
export function explorerPageQuery(tx: Executor, tenantId: string, input: ExplorerListInput) {
  const { cursor, limit, sort, ...filter } = explorerListInputSchema.parse(input);
  return operationPageQuery(tx, conditionsOf(tenantId, { ...filter, sort }), {
    limit,
    ...(cursor ? { cursor } : {}),
    ...orderOf(sort),
  });
}

/** One page of the explorer. */
export async function exploreWithdrawals(
  tx: Executor,
  tenantId: string,
  input: ExplorerListInput,
): Promise<{ items: OperationView[]; nextCursor: string | null }> {
  const { cursor, limit, sort, ...filter } = explorerListInputSchema.parse(input);
  const page = await pageOperations(tx, conditionsOf(tenantId, { ...filter, sort }), {
    limit,
    ...(cursor ? { cursor } : {}),
    ...orderOf(sort),
  });
  return { items: page.items.map(toView), nextCursor: page.nextCursor };
}

/** Everything the filter selects, in its order, up to the export bound (one statement). */
export async function exportWithdrawals(
  tx: Executor,
  tenantId: string,
  input: Parameters<typeof explorerFilterSchema.parse>[0],
  options: { max?: number } = {},
): Promise<{ items: OperationView[]; truncated: boolean }> {
  const filter = explorerFilterSchema.parse(input);
  const max = Math.min(options.max ?? EXPLORER_EXPORT_MAX, EXPLORER_EXPORT_MAX);
  const page = await pageOperations(tx, conditionsOf(tenantId, filter), {
    limit: max,
    limitMax: EXPLORER_EXPORT_MAX,
    ...orderOf(filter.sort),
  });
  return { items: page.items.map(toView), truncated: page.nextCursor !== null };
}
