import { scrubbedError } from '@idem/contracts';
import { assignOwner, getOperation, type Operation, schema, transition, withTenant } from '@idem/core';
import { and, desc, eq } from 'drizzle-orm';
import { candidateIds, lockOne, type Stage } from '../candidates.ts';
import type { WorkerContext } from '../context.ts';
import { type NetworkFee, paidNetworkFee } from '../network-fee.ts';
import { routeFor } from '../rails.ts';
import { custodianSettlement, gatherEvidence, type Verdict } from './evidence.ts';
import { isFinal } from './finality.ts';
import { confirmNotSent } from './not-sent.ts';
import { sendStoredArtifact } from './send.ts';
import { checkBroadcastAge } from './stuck.ts';

const { operationTransitions } = schema;

/** Runs `decide` for each candidate of a stage, with the chain or custodian asked first. */
async function forEachCandidate(
  ctx: WorkerContext,
  tenantId: string,
  stage: Stage,
  decide: (op: Operation, verdict: Verdict) => Promise<void>,
): Promise<number> {
  const ids = await candidateIds(ctx.db, tenantId, stage, ctx.batchSize, ctx.reorgWindowSeconds);
  let handled = 0;
  for (const operationId of ids) {
    const op = await withTenant(ctx.db, tenantId, (tx) => getOperation(tx, tenantId, operationId));
    if (stage === 'reorg' && routeFor(op.network).kind !== 'evm') continue;
    let verdict: Verdict;
    try {
      verdict = await gatherEvidence(ctx, op);
    } catch (error) {
      // No answer is no evidence: no state changes. Escalation by age alone goes on.
      const message = scrubbedError(error, 200);
      ctx.log.warn({ tenantId, operationId, stage, message }, 'rail could not be asked');
      await WITHOUT_AN_ANSWER[stage]?.(ctx, op, { rail: 'no answer', message });
      continue;
    }
    try {
      await decide(op, verdict);
    } catch (error) {
      // One withdrawal that cannot be settled (a stored artifact damaged, a database hiccup on its
      // row) must not hold up the rest of the batch, pass after pass. It stays where it is, funds
      // held; escalation by age names an owner (C15).
      const message = scrubbedError(error, 200);
      ctx.log.warn({ tenantId, operationId, stage, message }, 'withdrawal could not be reconciled this pass');
      await WITHOUT_AN_ANSWER[stage]?.(ctx, op, { rail: verdict.kind, message });
      continue;
    }
    handled += 1;
  }
  return handled;
}

/** Moves an operation if it is still where it was read; a concurrent worker's move wins quietly. */
async function moveIfCurrent(
  ctx: WorkerContext,
  op: Operation,
  stage: Stage,
  to: Operation['state'],
  reason: string,
  evidence: Record<string, unknown>,
  set?: { owner?: string; providerRef?: string; providerTxHash?: string },
  networkFee?: NetworkFee | null,
): Promise<Operation | null> {
  return withTenant(ctx.db, op.tenantId, async (tx) => {
    const current = await lockOne(tx, op.tenantId, op.operationId, stage, ctx.reorgWindowSeconds);
    if (!current || current.version !== op.version) return null;
    const next = await transition(tx, current, to, {
      actor: ctx.workerId,
      reason,
      evidence,
      ...(set ? { set } : {}),
      ...(networkFee ? { networkFee } : {}),
    });
    ctx.log.info(
      { tenantId: op.tenantId, operationId: op.operationId, from: op.state, to, evidence },
      reason,
    );
    return next;
  });
}

/** BROADCAST: confirm at the asset's depth; resend stored bytes a node dropped; anything else is UNKNOWN. */
export async function watchBroadcast(ctx: WorkerContext, tenantId: string): Promise<number> {
  return forEachCandidate(ctx, tenantId, 'watch', async (op, verdict) => {
    switch (verdict.kind) {
      case 'confirmed': {
        const fee = await feeOrNothing(ctx, op, verdict.evidence);
        if (fee === undefined) return;
        await moveIfCurrent(
          ctx,
          op,
          'watch',
          'CONFIRMED',
          'confirmed at the required depth',
          { ...verdict.evidence, networkFee: fee?.amountMinor.toString() ?? null },
          custodianSettlement(op, verdict.evidence),
          fee,
        );
        return;
      }
      case 'in_progress':
        if (verdict.evidence.newestAbsent === true) {
          // The newest recorded attempt never reached the node: send it (recorded bytes only).
          const resent = await sendStoredArtifact(ctx, op);
          ctx.log.warn(
            { tenantId, operationId: op.operationId, outcome: resent.sent },
            'newest recorded attempt missing from the pool; sent',
          );
        }
        // Mined but not yet deep enough is progress; pending in the pool is not.
        if (verdict.evidence.found !== 'mined') await checkBroadcastAge(ctx, op, verdict.evidence);
        return;
      case 'cancelled':
        if (!(await cancelIsFinal(ctx, op, verdict.evidence))) return;
        await moveIfCurrent(
          ctx,
          op,
          'watch',
          'VERIFIED_NOT_SENT',
          'our approved cancel is mined at depth; the payment can never be mined',
          verdict.evidence,
        );
        return;
      case 'failed_on_rail':
        await moveIfCurrent(
          ctx,
          op,
          'watch',
          'FAILED_TERMINAL',
          'transaction reverted on chain; a person decides',
          verdict.evidence,
          {
            owner: ctx.escalationOwner,
          },
        );
        ctx.log.error(
          { alert: true, tenantId, operationId: op.operationId },
          'ALERT withdrawal FAILED_TERMINAL: funds held, owner assigned',
        );
        return;
      case 'not_found':
        if (routeFor(op.network).kind === 'evm') {
          // Dropped from the pool: the newest recorded bytes go out again, never an unrecorded signature (C12).
          const resent = await sendStoredArtifact(ctx, op);
          ctx.log.warn(
            { tenantId, operationId: op.operationId, outcome: resent.sent },
            'transaction missing from the chain; stored bytes resent',
          );
          await checkBroadcastAge(ctx, op, { ...verdict.evidence, resend: resent.sent });
          return;
        }
        await moveIfCurrent(
          ctx,
          op,
          'watch',
          'UNKNOWN',
          'custodian has no record of an acknowledged transfer',
          verdict.evidence,
        );
        return;
      case 'not_sent':
      case 'contradictory':
        await moveIfCurrent(
          ctx,
          op,
          'watch',
          'UNKNOWN',
          `evidence contradicts the broadcast (${verdict.kind})`,
          verdict.evidence,
        );
        return;
    }
  });
}

/** CONFIRMED within the reorganisation window: a confirmation the chain no longer shows is undone (C17). */
export async function recheckConfirmed(ctx: WorkerContext, tenantId: string): Promise<number> {
  return forEachCandidate(ctx, tenantId, 'reorg', async (op, verdict) => {
    if (verdict.kind === 'confirmed') return;
    await moveIfCurrent(
      ctx,
      op,
      'reorg',
      'BROADCAST',
      'a reorganisation removed the confirmation; re-evaluating',
      verdict.evidence,
    );
    ctx.log.warn(
      { alert: true, tenantId, operationId: op.operationId },
      'ALERT reorganisation undid a confirmed withdrawal',
    );
  });
}

/**
 * UNKNOWN: reconcile before retry (C14). Evidence decides: found on the rail means BROADCAST or
 * CONFIRMED; verified not sent releases the hold; nothing found means the stored artifact is sent
 * again (same bytes, same reference). Without an answer the operation stays UNKNOWN, and past the
 * window it gets a named owner and an alert.
 */
export async function reconcileUnknown(ctx: WorkerContext, tenantId: string): Promise<number> {
  return forEachCandidate(ctx, tenantId, 'reconcile', async (op, verdict) => {
    switch (verdict.kind) {
      case 'confirmed': {
        const fee = await feeOrNothing(ctx, op, verdict.evidence);
        if (fee === undefined) return;
        await moveIfCurrent(
          ctx,
          op,
          'reconcile',
          'CONFIRMED',
          'reconciled: the rail shows the transfer at depth',
          { ...verdict.evidence, networkFee: fee?.amountMinor.toString() ?? null },
          custodianSettlement(op, verdict.evidence),
          fee,
        );
        return;
      }
      case 'in_progress':
        await moveIfCurrent(
          ctx,
          op,
          'reconcile',
          'BROADCAST',
          'reconciled: the rail has the transfer',
          verdict.evidence,
        );
        return;
      case 'failed_on_rail':
      case 'not_sent':
      case 'cancelled': {
        // The chain's "not sent" must be proven at a pinned block, twice; our own
        // cancel mined at depth is a positive answer and needs no second pass.
        if (verdict.kind === 'cancelled' && !(await cancelIsFinal(ctx, op, verdict.evidence))) return;
        const evidence =
          verdict.kind === 'not_sent' && routeFor(op.network).kind === 'evm'
            ? await confirmNotSent(ctx, op, verdict.evidence)
            : verdict.evidence;
        if (!evidence) return;
        await moveIfCurrent(
          ctx,
          op,
          'reconcile',
          'VERIFIED_NOT_SENT',
          'reconciled: authoritative evidence of no transfer',
          evidence,
        );
        return;
      }
      case 'not_found': {
        if (routeFor(op.network).kind === 'custodian' && (await lastSendWasRefused(ctx, op))) {
          await moveIfCurrent(
            ctx,
            op,
            'reconcile',
            'VERIFIED_NOT_SENT',
            'custodian refused the transfer and holds no record of it',
            verdict.evidence,
          );
          return;
        }
        const resent = await sendStoredArtifact(ctx, op);
        if (resent.sent === 'accepted') {
          await moveIfCurrent(
            ctx,
            op,
            'reconcile',
            'BROADCAST',
            'reconciled: nothing found, the stored artifact was resent and accepted',
            {
              ...verdict.evidence,
              resend: resent.detail,
            },
            resent.providerRef && !op.providerRef ? { providerRef: resent.providerRef } : undefined,
          );
          return;
        }
        await escalateIfDue(ctx, op, { ...verdict.evidence, resend: resent.detail });
        return;
      }
      case 'contradictory':
        await escalateIfDue(ctx, op, verdict.evidence, true);
        return;
    }
  });
}

/**
 * The gas paid, posted in the same transaction as CONFIRMED (null on a custodian rail). Undefined
 * when the receipt cannot be read: the confirmation waits for a pass that can post its fee.
 */
async function feeOrNothing(
  ctx: WorkerContext,
  op: Operation,
  evidence: Record<string, unknown>,
): Promise<NetworkFee | null | undefined> {
  try {
    return await paidNetworkFee(ctx, op, evidence);
  } catch (error) {
    ctx.log.warn(
      { tenantId: op.tenantId, operationId: op.operationId, message: scrubbedError(error, 200) },
      'network fee could not be read from the receipt; confirming on a later pass',
    );
    return undefined;
  }
}

async function escalateIfDue(
  ctx: WorkerContext,
  op: Operation,
  evidence: Record<string, unknown>,
  now = false,
): Promise<void> {
  if (op.owner) return;
  if (!now && ctx.now() - op.updatedAt.getTime() < ctx.unknownEscalateAfterMs) return;
  await withTenant(ctx.db, op.tenantId, async (tx) => {
    const current = await lockOne(tx, op.tenantId, op.operationId, 'reconcile', ctx.reorgWindowSeconds);
    if (!current || current.version !== op.version) return;
    await assignOwner(tx, current, {
      owner: ctx.escalationOwner,
      actor: ctx.workerId,
      reason: 'outcome still unknown after the reconciliation window; funds stay held',
      evidence,
    });
  });
  ctx.log.error(
    { alert: true, tenantId: op.tenantId, operationId: op.operationId, owner: ctx.escalationOwner },
    'ALERT UNKNOWN withdrawal escalated',
  );
}

/**
 * What a stage still does when the rail cannot be asked: what depends on time alone. An UNKNOWN
 * past its window gets its owner, and a BROADCAST past its ages its alert and owner, whether or
 * not the node or custodian answers (docs/RUNBOOK.md).
 */
const WITHOUT_AN_ANSWER: Partial<
  Record<Stage, (ctx: WorkerContext, op: Operation, evidence: Record<string, unknown>) => Promise<void>>
> = {
  watch: checkBroadcastAge,
  reconcile: (ctx, op, evidence) => escalateIfDue(ctx, op, evidence),
};

/** Whether the send that made this operation UNKNOWN was a clean refusal by the rail. */
async function lastSendWasRefused(ctx: WorkerContext, op: Operation): Promise<boolean> {
  const rows = await withTenant(ctx.db, op.tenantId, (tx) =>
    tx
      .select({ evidence: operationTransitions.evidence })
      .from(operationTransitions)
      .where(
        and(
          eq(operationTransitions.tenantId, op.tenantId),
          eq(operationTransitions.operationId, op.operationId),
          eq(operationTransitions.toState, 'UNKNOWN'),
        ),
      )
      .orderBy(desc(operationTransitions.seq))
      .limit(1),
  );
  const evidence = rows[0]?.evidence as { outcome?: string } | null | undefined;
  return evidence?.outcome === 'rejected';
}

/** Our cancel took the nonce: the hold is released only once the cancel's block is final. */
function cancelIsFinal(
  ctx: WorkerContext,
  op: Operation,
  evidence: Record<string, unknown>,
): Promise<boolean> {
  const block = evidence.blockNumber;
  if (typeof block !== 'string') return Promise.resolve(false);
  return isFinal(ctx, op, BigInt(block));
}
