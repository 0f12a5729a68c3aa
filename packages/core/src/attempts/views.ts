import type { OperationAttempts, WalletNonces } from '@idem/contracts';
import { and, asc, desc, eq, gte, inArray, isNotNull, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { hotWallets, operations, operationTransitions, signedAttempts } from '../db/schema/index.ts';
import { getOperation } from '../operations/operation-record.ts';
import { approvedCancel, feeCapInForce, listAttempts, REPLACEABLE_STATES } from './attempts.ts';

/** A withdrawal's attempts for the staff screen, with which one settled it (from the history). */
export async function operationAttempts(
  tx: Tx,
  tenantId: string,
  operationId: string,
): Promise<OperationAttempts> {
  const op = await getOperation(tx, tenantId, operationId);
  const attempts = await listAttempts(tx, tenantId, operationId);
  const settled = await tx
    .select({ evidence: operationTransitions.evidence })
    .from(operationTransitions)
    .where(
      and(
        eq(operationTransitions.tenantId, tenantId),
        eq(operationTransitions.operationId, operationId),
        inArray(operationTransitions.toState, ['CONFIRMED', 'VERIFIED_NOT_SENT']),
      ),
    )
    .orderBy(desc(operationTransitions.seq))
    .limit(1);
  const settledHash = (settled[0]?.evidence as { settledTxHash?: string } | null)?.settledTxHash ?? null;
  const final = op.state === 'CONFIRMED' || op.state === 'VERIFIED_NOT_SENT';
  const cap = await feeCapInForce(tx, op);
  return {
    operationId,
    state: op.state,
    attempts: attempts.map((a, index) => ({
      attemptNo: a.attemptNo,
      kind: a.kind,
      nonce: a.nonce,
      txHash: a.txHash,
      gasLimit: a.gasLimit,
      maxFeePerGas: a.maxFeePerGas,
      maxPriorityFeePerGas: a.maxPriorityFeePerGas,
      status:
        settledHash !== null && a.txHash === settledHash
          ? 'mined'
          : final
            ? 'not_mined'
            : index === attempts.length - 1
              ? 'latest'
              : 'superseded',
      createdBy: a.createdBy,
      requestedBy: a.requestedBy,
      createdAt: a.createdAt.toISOString(),
    })),
    feeCap: { capMinor: cap.capMinor?.toString() ?? null, version: cap.version, proposalId: cap.proposalId },
    cancelApproved: (await approvedCancel(tx, op)) !== null,
    replaceable:
      (REPLACEABLE_STATES as readonly string[]).includes(op.state) &&
      op.chainNonce !== null &&
      op.txHash !== null,
  };
}

/** How many nonces of the open window the view lists at most. */
const NONCE_WINDOW_MAX = 500;

/**
 * Each hot wallet's nonces: our operations by nonce from the lowest unsettled one, the
 * nonces we allocated that no operation holds, and, given the chain's counts, the operation every
 * later nonce waits for. A transaction that can never be mined (dropped, never broadcast) blocks
 * the queue; a fee bump or a cancel at its nonce closes the gap.
 */
export async function walletNonceView(
  tx: Tx,
  tenantId: string,
  /** The chain's counts per network, read by the caller outside this transaction (null: no answer). */
  chainCounts: Record<string, { latest: number; pending: number } | null>,
): Promise<WalletNonces[]> {
  const wallets = await tx.select().from(hotWallets).where(eq(hotWallets.tenantId, tenantId));
  const views: WalletNonces[] = [];
  for (const wallet of wallets) {
    const counts = chainCounts[wallet.network] ?? null;
    const open = await tx
      .select({ nonce: sql<number>`min(${operations.chainNonce})` })
      .from(operations)
      .where(
        and(
          eq(operations.tenantId, tenantId),
          eq(operations.network, wallet.network),
          isNotNull(operations.chainNonce),
          inArray(operations.state, ['SIGNED', 'BROADCAST', 'UNKNOWN', 'FAILED_TERMINAL']),
        ),
      );
    const lowestOpen = open[0]?.nonce ?? null;
    const from = Math.min(
      lowestOpen === null ? wallet.nextNonce : Number(lowestOpen),
      counts?.latest ?? wallet.nextNonce,
    );
    const rows = await tx
      .select({
        nonce: operations.chainNonce,
        operationId: operations.operationId,
        reference: operations.reference,
        state: operations.state,
        attempts: sql<number>`(select count(*)::int from ${signedAttempts} a where a.tenant_id = ${operations.tenantId} and a.operation_id = ${operations.operationId})`,
        lastAttemptKind: sql<
          string | null
        >`(select a.kind from ${signedAttempts} a where a.tenant_id = ${operations.tenantId} and a.operation_id = ${operations.operationId} order by a.attempt_no desc limit 1)`,
      })
      .from(operations)
      .where(
        and(
          eq(operations.tenantId, tenantId),
          eq(operations.network, wallet.network),
          gte(operations.chainNonce, from),
        ),
      )
      .orderBy(asc(operations.chainNonce))
      .limit(NONCE_WINDOW_MAX);
    const byNonce = new Map(rows.map((r) => [Number(r.nonce), r]));
    const missing: number[] = [];
    for (let n = from; n < wallet.nextNonce && missing.length < NONCE_WINDOW_MAX; n += 1) {
      if (!byNonce.has(n)) missing.push(n);
    }
    let blocking: WalletNonces['blocking'] = null;
    if (counts && counts.latest < wallet.nextNonce) {
      const at = byNonce.get(counts.latest);
      blocking = { nonce: counts.latest, operationId: at?.operationId ?? null, state: at?.state ?? null };
    }
    views.push({
      network: wallet.network,
      address: wallet.address,
      nextNonce: wallet.nextNonce,
      chainLatest: counts?.latest ?? null,
      chainPending: counts?.pending ?? null,
      blocking,
      operations: rows.map((r) => ({
        nonce: Number(r.nonce),
        operationId: r.operationId,
        reference: r.reference,
        state: r.state,
        attempts: Number(r.attempts),
        lastAttemptKind: r.lastAttemptKind,
      })),
      missing,
    });
  }
  return views;
}
