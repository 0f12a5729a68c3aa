import type { OperationKind, OperationState, OperationView } from '@idem/contracts';
import { IdemError } from '@idem/contracts';
import { and, desc, eq, lt, or, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/connect.ts';
import { assets, operations } from '../db/schema/index.ts';
import { type Operation, toView } from '../operations/operation-record.ts';

export const LIST_LIMIT_MAX = 100;

/**
 * A page of one tenant's operations, newest first. The cursor is opaque to callers: the position
 * (created_at, operation_id) of the last item, so pages stay stable while new operations arrive.
 */
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
  const limit = Math.min(Math.max(1, Math.trunc(options.limit)), LIST_LIMIT_MAX);
  const conditions: SQL[] = [eq(operations.tenantId, tenantId), eq(operations.kind, options.kind)];
  if (options.state) conditions.push(eq(operations.state, options.state));
  if (options.accountRef !== undefined) conditions.push(eq(operations.accountRef, options.accountRef));
  if (options.cursor) {
    const position = decodeCursor(options.cursor);
    const after = or(
      lt(operations.createdAt, position.createdAt),
      and(eq(operations.createdAt, position.createdAt), lt(operations.operationId, position.operationId)),
    );
    if (after) conditions.push(after);
  }
  const rows = (await db
    .select()
    .from(operations)
    .where(and(...conditions))
    .orderBy(desc(operations.createdAt), desc(operations.operationId))
    .limit(limit + 1)) as Operation[];
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const nextCursor = rows.length > limit && last ? encodeCursor(last) : null;
  return { items: page.map(toView), nextCursor };
}

function encodeCursor(op: Operation): string {
  return Buffer.from(`${op.createdAt.toISOString()}|${op.operationId}`, 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: Date; operationId: string } {
  const [iso, operationId] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const createdAt = new Date(iso ?? '');
  if (
    !operationId ||
    Number.isNaN(createdAt.getTime()) ||
    !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(operationId)
  ) {
    throw new IdemError('VALIDATION', 'cursor is not one this API returned', {
      issues: [{ path: 'cursor', message: 'invalid cursor' }],
    });
  }
  return { createdAt, operationId };
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
