import { isIdemError, scrubbedError, scrubMessage } from '@idem/contracts';
import {
  approvalOf,
  approvedCancel,
  feeCapInForce,
  getHotWallet,
  leaseForReplacement,
  listAttempts,
  openBumpRequest,
  recordAttempt,
  recordOriginalAttempt,
  type SignedAttempt,
  withTenant,
} from '@idem/core';
import { type BroadcastOutcome, replacementFees } from '@idem/rails';
import { type Hex, parseTransaction } from 'viem';
import { candidateIds, lockOne } from '../candidates.ts';
import type { WorkerContext } from '../context.ts';
import { routeFor } from '../rails.ts';

/** When a stuck withdrawal is bumped automatically, per network. */
export interface ReplacePolicy {
  /** How long the newest attempt may sit unmined before the next bump. */
  bumpAfterMs: number;
  /** Automatic bumps per withdrawal at most (staff bumps and cancels are not counted). */
  maxBumps: number;
}

export const DEFAULT_REPLACE_POLICIES: Record<string, ReplacePolicy> = {
  ethereum: { bumpAfterMs: 10 * 60_000, maxBumps: 5 },
};

/**
 * Sent withdrawals that are not mined get a new signature with the same nonce: a fee bump (same
 * recipient, amount and data) when the per-network policy says it has waited long enough or a
 * staff member asked for one, or a cancel (a zero-value transfer to the hot wallet itself) once
 * a cancel proposal was approved. Each attempt is recorded, fenced by a fresh lease generation,
 * in the transaction that signs it, and only then broadcast: a crash before the commit leaves
 * nothing signed anywhere; a crash after it leaves bytes the watch step resends. Never a new nonce.
 */
export async function replaceStuck(ctx: WorkerContext, tenantId: string): Promise<number> {
  const ids = await candidateIds(ctx.db, tenantId, 'replace', ctx.batchSize, ctx.reorgWindowSeconds);
  let replaced = 0;
  for (const operationId of ids) {
    const prepared = await prepareAttempt(ctx, tenantId, operationId);
    if (!prepared) continue;
    await ctx.probe?.('replacement-recorded', operationId);
    let outcome: BroadcastOutcome | { outcome: 'raised'; detail: string };
    try {
      outcome = await prepared.broadcast();
    } catch (error) {
      outcome = { outcome: 'raised', detail: scrubbedError(error, 200) };
    }
    // Whatever the answer, the recorded attempt is one of the hashes the watch step looks for.
    ctx.log.info(
      {
        tenantId,
        operationId,
        attemptNo: prepared.attempt.attemptNo,
        kind: prepared.attempt.kind,
        txHash: prepared.attempt.txHash,
        outcome: outcome.outcome,
        ...('detail' in outcome ? { detail: scrubMessage(outcome.detail).slice(0, 200) } : {}),
      },
      `${prepared.attempt.kind} attempt recorded and broadcast`,
    );
    replaced += 1;
  }
  return replaced;
}

async function prepareAttempt(
  ctx: WorkerContext,
  tenantId: string,
  operationId: string,
): Promise<{ attempt: SignedAttempt; broadcast: () => Promise<BroadcastOutcome> } | null> {
  try {
    return await withTenant(ctx.db, tenantId, async (tx) => {
      const op = await lockOne(tx, tenantId, operationId, 'replace', ctx.reorgWindowSeconds);
      if (!op || routeFor(op.network).kind !== 'evm' || !op.signedArtifact || op.chainNonce === null) {
        return null;
      }
      const wallet = await getHotWallet(tx, tenantId, op.network);
      const rail = ctx.rails.evmFor(wallet);
      let attempts = await listAttempts(tx, tenantId, operationId);
      if (attempts.length === 0) {
        // Signed before attempts were recorded: its own bytes become attempt 1, fees read from them.
        const parsed = parseTransaction(op.signedArtifact as Hex);
        await recordOriginalAttempt(tx, op, {
          fees: {
            gasLimit: parsed.gas ?? 0n,
            maxFeePerGas: parsed.maxFeePerGas ?? 0n,
            maxPriorityFeePerGas: parsed.maxPriorityFeePerGas ?? 0n,
          },
          createdBy: ctx.workerId,
        });
        attempts = await listAttempts(tx, tenantId, operationId);
      }
      const last = attempts.at(-1);
      if (!last) return null;

      const cancel = await approvedCancel(tx, op);
      const policy = ctx.replacePolicies?.[op.network] ?? DEFAULT_REPLACE_POLICIES[op.network];
      const waited = ctx.now() - last.createdAt.getTime();
      const autoBumps = attempts.filter((a) => a.requestedBy === 'policy').length;
      const policyDue =
        policy !== undefined &&
        waited >= policy.bumpAfterMs &&
        autoBumps < policy.maxBumps &&
        op.state === 'BROADCAST';
      let kind: 'replacement' | 'cancel';
      let requestedBy: string;
      if (cancel && last.kind !== 'cancel') {
        kind = 'cancel';
        requestedBy = `proposal:${cancel.proposalId}`;
      } else if (cancel) {
        // A stuck cancel is bumped like a payment, by policy.
        if (!policyDue) return null;
        kind = 'cancel';
        requestedBy = 'policy';
      } else {
        const request = await openBumpRequest(tx, op, last.createdAt);
        if (request) {
          kind = 'replacement';
          requestedBy = request.requestedBy;
        } else if (policyDue) {
          kind = 'replacement';
          requestedBy = 'policy';
        } else {
          return null;
        }
      }

      const gasLimit = kind === 'cancel' ? 21_000n : BigInt(last.gasLimit);
      // The approved cap bounds the total fee (gasLimit * maxFeePerGas, native minor units): above
      // it, a new cap must be approved first (a raise_fee_cap proposal, four eyes).
      const cap = await feeCapInForce(tx, op);
      const next = replacementFees(
        { maxFeePerGas: BigInt(last.maxFeePerGas), maxPriorityFeePerGas: BigInt(last.maxPriorityFeePerGas) },
        await ctx.rails.quoteFees(),
        ctx.rails.feePolicy(),
        { gasLimit, feeCapWei: cap.capMinor },
      );
      if (!next.ok) {
        ctx.log.error(
          {
            alert: true,
            tenantId,
            operationId,
            needMinor: (gasLimit * next.fees.maxFeePerGas).toString(),
            capMinor: cap.capMinor?.toString() ?? null,
            ceilingPerGas: next.ceilingPerGas.toString(),
            capVersion: cap.version,
          },
          'ALERT stuck withdrawal needs a fee above its approved cap: propose raise_fee_cap',
        );
        return null;
      }
      const fees = next.fees;
      const leased = await leaseForReplacement(tx, {
        operation: op,
        workerId: ctx.workerId,
        leaseMs: ctx.leaseMs,
        reason: `${kind} of attempt ${last.attemptNo} (requested by ${requestedBy}); recorded before broadcast`,
      });
      if (!leased) return null;
      const signed =
        kind === 'cancel'
          ? await rail.signCancel(last.signedArtifact as Hex, fees, approvalOf(op))
          : await rail.signReplacement(last.signedArtifact as Hex, fees, approvalOf(op));
      // The signature exists only in memory until this transaction commits: a crash here leaves
      // nothing that could be broadcast.
      await ctx.probe?.('replacement-signed', operationId);
      const attempt = await recordAttempt(tx, {
        tenantId,
        operationId,
        leaseGeneration: leased.leaseGeneration,
        kind,
        signedArtifact: signed.rawTransaction,
        txHash: signed.txHash,
        nonce: op.chainNonce,
        fees: { gasLimit, ...fees },
        workerId: ctx.workerId,
        requestedBy,
      });
      return { attempt, broadcast: () => rail.broadcast(signed.rawTransaction) };
    });
  } catch (error) {
    if (isIdemError(error, 'SIGNER_UNAVAILABLE')) {
      // Nothing was recorded; the stored attempt stays the newest and the bump is tried again.
      ctx.log.warn(
        { tenantId, operationId, message: scrubbedError(error, 200) },
        'the signer did not answer; no replacement recorded',
      );
      return null;
    }
    if (isIdemError(error, 'VALIDATION') || isIdemError(error, 'PAYLOAD_MISMATCH')) {
      ctx.log.error(
        { alert: true, tenantId, operationId, message: scrubbedError(error) },
        'ALERT cannot sign a replacement',
      );
      return null;
    }
    throw error;
  }
}
