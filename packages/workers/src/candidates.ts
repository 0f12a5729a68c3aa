import {
  type Database,
  notHeldByFreeze,
  type Operation,
  rowsOf,
  schema,
  type Tx,
  withAppRole,
  withTenant,
} from '@idem/core';
import { and, asc, desc, eq, inArray, isNotNull, isNull, lt, or, sql } from 'drizzle-orm';

const { operations, assets } = schema;

/**
 * The tenants that have work, found without reading across tenants: a SECURITY DEFINER function
 * returns tenant ids only (core/sql/idem_tenants_with_work.sql), called under the application role.
 */
export async function tenantsWithWork(db: Database, reorgWindowSeconds: number): Promise<string[]> {
  return withAppRole(db, async (tx) => {
    const rows = rowsOf<{ tenant_id: string }>(
      await tx.execute(sql`select tenant_id::text from idem_tenants_with_work(${reorgWindowSeconds})`),
    );
    return rows.map((row) => row.tenant_id);
  });
}

/**
 * The order one pass visits the tenants with work in: a fresh random permutation each pass.
 * Workers that all took the database's order would all start on the same tenant and queue on its
 * hot wallet's nonce lock (allocateNonce) while the other wallets idle, so adding a worker process
 * added nothing (I16-SCALE). Fisher-Yates; the given list is not changed.
 */
export function visitOrder<T>(items: readonly T[], random: () => number = Math.random): T[] {
  const order = [...items];
  for (let i = order.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j] as T, order[i] as T];
  }
  return order;
}

export type Stage = 'dispatch' | 'resume' | 'watch' | 'reconcile' | 'reorg' | 'replace';

/**
 * Which operations each stage looks at. Signing and a first send skip what a freeze in force holds
 * (docs/GOVERNANCE.md "Freeze"; the claims check it again in their own statements); watching,
 * reconciling, replacing and reorg checks of what is already on chain go on under a freeze.
 */
function stageCondition(stage: Stage, reorgWindowSeconds: number) {
  switch (stage) {
    case 'dispatch':
      return and(
        or(
          eq(operations.state, 'APPROVED'),
          and(
            eq(operations.state, 'SIGNING'),
            lt(operations.leaseExpiresAt, sql`now()`),
            isNull(operations.signedArtifact),
          ),
        ),
        notHeldByFreeze(),
      );
    case 'resume':
      return and(
        eq(operations.state, 'SIGNED'),
        or(isNull(operations.leaseExpiresAt), lt(operations.leaseExpiresAt, sql`now()`)),
        notHeldByFreeze(),
      );
    case 'watch':
      return eq(operations.state, 'BROADCAST');
    case 'reconcile':
      return eq(operations.state, 'UNKNOWN');
    case 'replace':
      // Sent and not settled, signed on a chain, and nobody holding a replacement lease.
      return and(
        inArray(operations.state, ['BROADCAST', 'UNKNOWN']),
        isNotNull(operations.chainNonce),
        or(isNull(operations.leaseExpiresAt), lt(operations.leaseExpiresAt, sql`now()`)),
      );
    case 'reorg':
      return and(
        eq(operations.state, 'CONFIRMED'),
        sql`${operations.updatedAt} > now() - make_interval(secs => ${reorgWindowSeconds})`,
      );
  }
}

/**
 * Which candidates come first when there are more than a batch. Leasing and resuming take the
 * oldest first (each leaves the set once handled). Watching and reconciling take a random batch:
 * an operation that stays pending or unresolved keeps its timestamp, and oldest-first would let a
 * few stuck ones starve every newer one. Reorg rechecks take the most recent confirmations first:
 * they are the ones a reorganisation can still undo.
 */
function stageOrder(stage: Stage) {
  if (stage === 'reconcile' || stage === 'watch' || stage === 'replace') return sql`random()`;
  if (stage === 'reorg') return desc(operations.updatedAt);
  return asc(operations.updatedAt);
}

/**
 * Picks up to `limit` withdrawals for a stage, locking them with SKIP LOCKED so concurrent workers
 * take disjoint sets. The lock lasts for the caller's transaction; the state change itself is
 * still a conditional UPDATE, so a worker that read stale data changes nothing.
 */
export async function lockCandidates(
  tx: Tx,
  tenantId: string,
  stage: Stage,
  limit: number,
  reorgWindowSeconds: number,
): Promise<Operation[]> {
  const rows = await tx
    .select()
    .from(operations)
    .where(
      and(
        eq(operations.tenantId, tenantId),
        eq(operations.kind, 'withdrawal'),
        stageCondition(stage, reorgWindowSeconds),
      ),
    )
    .orderBy(stageOrder(stage))
    .limit(limit)
    .for('update', { skipLocked: true });
  return rows as Operation[];
}

/** The ids to work on, read without holding locks (each is then locked and re-checked). */
export async function candidateIds(
  db: Database,
  tenantId: string,
  stage: Stage,
  limit: number,
  reorgWindowSeconds: number,
): Promise<string[]> {
  return withTenant(db, tenantId, async (tx) =>
    (await lockCandidates(tx, tenantId, stage, limit, reorgWindowSeconds)).map((op) => op.operationId),
  );
}

/** Locks one operation if it is still a candidate for the stage; null if someone else has it. */
export async function lockOne(
  tx: Tx,
  tenantId: string,
  operationId: string,
  stage: Stage,
  reorgWindowSeconds: number,
): Promise<Operation | null> {
  const rows = await tx
    .select()
    .from(operations)
    .where(
      and(
        eq(operations.tenantId, tenantId),
        inArray(operations.operationId, [operationId]),
        stageCondition(stage, reorgWindowSeconds),
      ),
    )
    .for('update', { skipLocked: true });
  return (rows[0] as Operation | undefined) ?? null;
}

export async function assetOf(tx: Tx, op: Operation) {
  const rows = await tx
    .select()
    .from(assets)
    .where(and(eq(assets.tenantId, op.tenantId), eq(assets.code, op.assetCode)));
  const asset = rows[0];
  if (!asset) throw new Error(`asset ${op.assetCode} vanished`);
  return asset;
}
