import { IdemError, isValidDestination, type Network } from '@idem/contracts';
import { and, eq, gt, inArray, isNotNull, isNull, or, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { chainCursors, depositAddresses, depositObservations } from '../db/schema/index.ts';

export type DepositObservation = typeof depositObservations.$inferSelect;

/** Assigns a deposit address to a customer account, for good (the database refuses a change). */
export async function registerDepositAddress(
  tx: Tx,
  input: { tenantId: string; network: Network; address: string; accountRef: string },
): Promise<void> {
  if (!isValidDestination(input.network, input.address)) {
    throw new IdemError('VALIDATION', `not a valid ${input.network} address`);
  }
  await tx.insert(depositAddresses).values(input).onConflictDoNothing();
}

export async function listDepositAddresses(tx: Tx, tenantId: string, network: string) {
  return tx
    .select()
    .from(depositAddresses)
    .where(and(eq(depositAddresses.tenantId, tenantId), eq(depositAddresses.network, network)))
    .limit(1_000);
}

/** Which account each of these addresses is registered to on a network (absent: not the tenant's). */
export async function depositAddressOwners(
  tx: Tx,
  tenantId: string,
  network: string,
  addresses: readonly string[],
): Promise<Map<string, string>> {
  const unique = [...new Set(addresses)];
  if (unique.length === 0) return new Map();
  const rows = await tx
    .select({ address: depositAddresses.address, accountRef: depositAddresses.accountRef })
    .from(depositAddresses)
    .where(
      and(
        eq(depositAddresses.tenantId, tenantId),
        eq(depositAddresses.network, network),
        inArray(depositAddresses.address, unique),
      ),
    );
  return new Map(rows.map((row) => [row.address, row.accountRef]));
}

/** Where the next scan of a stream starts, and the hash of the block before it when one was recorded. */
export interface ScanPosition {
  nextBlock: number;
  scannedHash: string | null;
}

/** Where the next scan of a stream (a network, or the custodian feed) starts; created at `startAt` on first use. */
export async function scanPosition(
  tx: Tx,
  tenantId: string,
  network: string,
  startAt: number,
): Promise<ScanPosition> {
  await tx.insert(chainCursors).values({ tenantId, network, nextBlock: startAt }).onConflictDoNothing();
  const rows = await tx
    .select({ nextBlock: chainCursors.nextBlock, scannedHash: chainCursors.scannedHash })
    .from(chainCursors)
    .where(and(eq(chainCursors.tenantId, tenantId), eq(chainCursors.network, network)))
    .for('update');
  return rows[0] ?? { nextBlock: startAt, scannedHash: null };
}

export async function scanCursor(
  tx: Tx,
  tenantId: string,
  network: string,
  startAt: number,
): Promise<number> {
  return (await scanPosition(tx, tenantId, network, startAt)).nextBlock;
}

/** Moves a cursor forward only (a slower concurrent pass never moves it back). */
export async function advanceCursor(
  tx: Tx,
  tenantId: string,
  network: string,
  nextBlock: number,
  scannedHash?: string,
): Promise<void> {
  await tx
    .update(chainCursors)
    .set({ nextBlock, updatedAt: sql`now()`, ...(scannedHash ? { scannedHash } : {}) })
    .where(
      and(
        eq(chainCursors.tenantId, tenantId),
        eq(chainCursors.network, network),
        sql`${chainCursors.nextBlock} <= ${nextBlock}`,
      ),
    );
}

/**
 * Moves a cursor back to `nextBlock` because the chain below it was rewritten, only if it is still
 * where the caller read it (a concurrent pass that already rewound or moved on wins). True when moved.
 */
export async function rewindCursor(
  tx: Tx,
  tenantId: string,
  network: string,
  read: ScanPosition,
  nextBlock: number,
): Promise<boolean> {
  const moved = await tx
    .update(chainCursors)
    .set({ nextBlock, scannedHash: null, updatedAt: sql`now()` })
    .where(
      and(
        eq(chainCursors.tenantId, tenantId),
        eq(chainCursors.network, network),
        eq(chainCursors.nextBlock, read.nextBlock),
        read.scannedHash === null
          ? isNull(chainCursors.scannedHash)
          : eq(chainCursors.scannedHash, read.scannedHash),
      ),
    )
    .returning({ nextBlock: chainCursors.nextBlock });
  return moved.length === 1;
}

/**
 * Records a deposit seen on chain. Seeing it again changes nothing (the id is the chain's), except
 * for an orphaned one: its transaction reappeared, so it is seen again, at its new block, and
 * waits for depth like any other. True when inserted or seen again.
 */
export async function observeDeposit(
  tx: Tx,
  input: Omit<
    typeof depositObservations.$inferInsert,
    'status' | 'operationId' | 'firstSeenAt' | 'updatedAt' | 'mismatchHead' | 'mismatchHash'
  >,
): Promise<boolean> {
  const inserted = await tx
    .insert(depositObservations)
    .values(input)
    .onConflictDoUpdate({
      target: [depositObservations.tenantId, depositObservations.depositId],
      set: {
        status: 'seen',
        blockNumber: input.blockNumber,
        blockHash: input.blockHash,
        mismatchHead: null,
        mismatchHash: null,
        updatedAt: sql`now()`,
      },
      setWhere: eq(depositObservations.status, 'orphaned'),
    })
    .returning();
  return inserted.length === 1;
}

/**
 * The watcher's reading of an observation's block, when the node gave a positive answer:
 * - `canonical`: its transaction is in the canonical block it names (`at`, moved there when it was
 *   re-mined elsewhere); any earlier sighting of a reorganisation is cleared.
 * - `replaced`: the canonical block at its height has another hash and its transaction is in no
 *   canonical block. The first such sighting is only recorded (`mismatch_head`); a later one, at a
 *   higher head, is the reorganisation. Returns whether to act on it now.
 * A read that failed or timed out is no reading: the caller changes nothing.
 */
export async function recordCanonical(
  tx: Tx,
  observation: DepositObservation,
  at: { blockNumber: number; blockHash: string },
): Promise<void> {
  if (
    observation.blockNumber === at.blockNumber &&
    observation.blockHash === at.blockHash &&
    observation.mismatchHead === null
  )
    return;
  await tx
    .update(depositObservations)
    .set({ ...at, mismatchHead: null, mismatchHash: null, updatedAt: sql`now()` })
    .where(
      and(
        eq(depositObservations.tenantId, observation.tenantId),
        eq(depositObservations.depositId, observation.depositId),
        eq(depositObservations.status, observation.status),
      ),
    );
}

export async function recordReplaced(
  tx: Tx,
  observation: DepositObservation,
  seen: { head: number; otherHash: string },
): Promise<boolean> {
  // Seen before, by a pass when the chain was lower: this is the second, later sighting.
  if (observation.mismatchHead !== null && seen.head > observation.mismatchHead) return true;
  if (observation.mismatchHead === null) {
    await tx
      .update(depositObservations)
      .set({ mismatchHead: seen.head, mismatchHash: seen.otherHash, updatedAt: sql`now()` })
      .where(
        and(
          eq(depositObservations.tenantId, observation.tenantId),
          eq(depositObservations.depositId, observation.depositId),
          eq(depositObservations.status, observation.status),
          isNull(depositObservations.mismatchHead),
        ),
      );
  }
  return false;
}

/**
 * Observations in these statuses above `sinceBlock`; with `sightingPending`, also any deeper one
 * whose reorganisation sighting is not yet settled either way (it must be seen again or cleared).
 */
export async function observationsIn(
  tx: Tx,
  tenantId: string,
  statuses: DepositObservation['status'][],
  sinceBlock = 0,
  options: { sightingPending?: boolean } = {},
): Promise<DepositObservation[]> {
  const above = gt(depositObservations.blockNumber, sinceBlock);
  return tx
    .select()
    .from(depositObservations)
    .where(
      and(
        eq(depositObservations.tenantId, tenantId),
        inArray(depositObservations.status, statuses),
        options.sightingPending ? or(above, isNotNull(depositObservations.mismatchHead)) : above,
      ),
    )
    .limit(1_000);
}

/** Moves an observation on, only from the status it was read in. */
export async function markObservation(
  tx: Tx,
  observation: DepositObservation,
  status: 'credited' | 'orphaned' | 'reversed',
  operationId?: string,
): Promise<boolean> {
  const updated = await tx
    .update(depositObservations)
    .set({ status, updatedAt: sql`now()`, ...(operationId ? { operationId } : {}) })
    .where(
      and(
        eq(depositObservations.tenantId, observation.tenantId),
        eq(depositObservations.depositId, observation.depositId),
        eq(depositObservations.status, observation.status),
      ),
    )
    .returning();
  return updated.length === 1;
}
