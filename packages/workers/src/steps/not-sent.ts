import { type Operation, schema, withTenant } from '@idem/core';
import { and, eq, sql } from 'drizzle-orm';
import type { WorkerContext } from '../context.ts';
import { attestSettlement } from '../settlement-witness.ts';

const { notSentObservations } = schema;

/** The chain answers that prove no transfer of ours can still happen. */
const PROVEN = new Set(['nonce_consumed_by_other', 'reverted_at_depth']);
/** Answers that say nothing about this withdrawal, only about the node: the first pass stays. */
const NODE_SILENT = new Set(['rail_unreachable', 'finalized_block_unknown']);

interface ChainDetail {
  reason?: string;
  pinnedBlock?: string;
  headBlock?: string;
  blockNumber?: string | null;
  consumer?: { txHash: string; blockNumber: string } | null;
  finalizedBlock?: string | null;
}

/**
 * Before the reconciler releases an EVM withdrawal's hold as VERIFIED_NOT_SENT: the
 * lookup's "absent, nonce consumed" is only a hint, since its reads may hit different nodes behind
 * a load balancer. The proof is the settlement witness (the same one manual resolution uses): every
 * read pinned to one block at the asset's depth, the transaction that took our nonce found there
 * and none of ours. It must be seen on two passes at least `notSentConfirmIntervalMs` apart, the
 * second pinned no lower and naming the same transaction; the first is kept in the database, so a
 * restart neither skips nor loses it. The witness answers NOT_SENT only once that transaction is
 * final (I32-FINAL); a pass proven at depth but not final yet is recorded all the same, so the
 * interval runs alongside finality, and only a final second pass releases. Returns the evidence to
 * release with, or null: stay UNKNOWN. A rail that cannot be asked (or cannot say which block is
 * finalized) changes nothing; an answer short of proof forgets the first pass.
 */
export async function confirmNotSent(
  ctx: WorkerContext,
  op: Operation,
  hint: Record<string, unknown>,
): Promise<Record<string, unknown> | null> {
  const attestation = await attestSettlement(ctx, op, { toState: 'VERIFIED_NOT_SENT' });
  const detail = attestation.detail as ChainDetail;
  const where = and(
    eq(notSentObservations.tenantId, op.tenantId),
    eq(notSentObservations.operationId, op.operationId),
  );
  if (attestation.verdict === 'UNPROVEN' && NODE_SILENT.has(detail.reason ?? '')) {
    if (detail.reason === 'finalized_block_unknown') {
      ctx.log.warn(
        { tenantId: op.tenantId, operationId: op.operationId },
        'the node did not say which block is finalized; the hold stays',
      );
    }
    return null;
  }
  const final = attestation.verdict === 'NOT_SENT' && PROVEN.has(detail.reason ?? '');
  const atDepth = final || (attestation.verdict === 'UNPROVEN' && detail.reason === 'not_final');
  // What took the nonce: another transaction, or our own reverted one (the witness finds it either way).
  const taker = detail.consumer ?? null;
  if (!atDepth || !taker || op.chainNonce === null || detail.pinnedBlock === undefined) {
    await withTenant(ctx.db, op.tenantId, (tx) => tx.delete(notSentObservations).where(where));
    ctx.log.info(
      { tenantId: op.tenantId, operationId: op.operationId, verdict: attestation.verdict, detail },
      'not sent is not proven at depth; the hold stays',
    );
    return null;
  }
  const pass = {
    reason: detail.reason,
    nonce: op.chainNonce,
    consumer: taker.txHash,
    consumerBlock: Number(taker.blockNumber),
    pinnedBlock: Number(detail.pinnedBlock),
    headBlock: detail.headBlock ?? null,
  };
  return withTenant(ctx.db, op.tenantId, async (tx) => {
    const [first] = await tx
      .select({
        nonce: notSentObservations.nonce,
        consumerTxHash: notSentObservations.consumerTxHash,
        consumerBlock: notSentObservations.consumerBlock,
        pinnedBlock: notSentObservations.pinnedBlock,
        observedAt: notSentObservations.observedAt,
        // The database's clock for both passes: workers' clocks may differ.
        ageMs: sql<number>`(extract(epoch from now() - ${notSentObservations.observedAt}) * 1000)::float8`,
      })
      .from(notSentObservations)
      .where(where)
      .for('update');
    const same =
      first !== undefined &&
      first.nonce === pass.nonce &&
      first.consumerTxHash.toLowerCase() === pass.consumer.toLowerCase() &&
      first.consumerBlock === pass.consumerBlock;
    if (!same) {
      const values = {
        nonce: pass.nonce,
        consumerTxHash: pass.consumer,
        consumerBlock: pass.consumerBlock,
        pinnedBlock: pass.pinnedBlock,
        observedAt: sql`now()`,
      };
      await tx
        .insert(notSentObservations)
        .values({ tenantId: op.tenantId, operationId: op.operationId, ...values })
        .onConflictDoUpdate({
          target: [notSentObservations.tenantId, notSentObservations.operationId],
          set: values,
        });
      ctx.log.info(
        { tenantId: op.tenantId, operationId: op.operationId, pass },
        'not sent: first pass recorded; a second pass after the interval decides',
      );
      return null;
    }
    // A view lower than the first pass's, or too soon: wait for a later pass.
    if (pass.pinnedBlock < first.pinnedBlock || Number(first.ageMs) < ctx.notSentConfirmIntervalMs)
      return null;
    if (!final) {
      ctx.log.info(
        { tenantId: op.tenantId, operationId: op.operationId, pass, finalizedBlock: detail.finalizedBlock },
        'the transaction that took the nonce is not final yet; the hold stays',
      );
      return null;
    }
    return {
      ...hint,
      reason: pass.reason,
      firstPass: {
        observedAt: first.observedAt.toISOString(),
        pinnedBlock: first.pinnedBlock,
        consumer: first.consumerTxHash,
        consumerBlock: first.consumerBlock,
      },
      secondPass: pass,
      witness: detail,
    };
  });
}
