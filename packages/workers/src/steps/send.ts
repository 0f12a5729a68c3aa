import { scrubbedError, scrubMessage } from '@idem/contracts';
import { getHotWallet, listAttempts, type Operation, transition, withTenant } from '@idem/core';
import type { BroadcastOutcome, SubmitOutcome } from '@idem/rails';
import { createTransferBodySchema } from '@idem/rails';
import type { Hex } from 'viem';
import type { WorkerContext } from '../context.ts';
import { routeFor } from '../rails.ts';

export type SendResult =
  | { sent: 'accepted'; providerRef?: string | undefined; detail: Record<string, unknown> }
  | { sent: 'rejected' | 'ambiguous'; detail: Record<string, unknown> };

/**
 * Sends the operation's stored artifact, exactly as persisted, and never anything else (C12):
 * the signed transaction bytes on an EVM network, or the stored transfer instruction, under our
 * reference, to the custodian.
 */
export async function sendStoredArtifact(ctx: WorkerContext, op: Operation): Promise<SendResult> {
  if (!op.signedArtifact) throw new Error(`operation ${op.operationId} has no stored artifact to send`);
  if (routeFor(op.network).kind === 'evm') {
    // The newest recorded attempt (a fee bump or a cancel replaces the original in the pool; the
    // original's bytes would only be refused as underpriced). Recorded before any broadcast.
    const { wallet, attempts } = await withTenant(ctx.db, op.tenantId, async (tx) => ({
      wallet: await getHotWallet(tx, op.tenantId, op.network),
      attempts: await listAttempts(tx, op.tenantId, op.operationId),
    }));
    const bytes = attempts.at(-1)?.signedArtifact ?? op.signedArtifact;
    const outcome: BroadcastOutcome = await ctx.rails.evmFor(wallet).broadcast(bytes as Hex);
    if (outcome.outcome === 'accepted') {
      return {
        sent: 'accepted',
        detail: { rail: 'evm', txHash: outcome.txHash, alreadyKnown: outcome.alreadyKnown },
      };
    }
    return {
      sent: outcome.outcome,
      detail: { rail: 'evm', reason: outcome.reason, detail: scrubMessage(outcome.detail).slice(0, 300) },
    };
  }
  const instruction = createTransferBodySchema.parse(JSON.parse(op.signedArtifact));
  const outcome: SubmitOutcome = await ctx.rails.custodian().submit(instruction);
  if (outcome.outcome === 'acknowledged') {
    return {
      sent: 'accepted',
      providerRef: outcome.transfer.id,
      detail: { rail: 'custodian', via: outcome.via },
    };
  }
  if (outcome.outcome === 'rejected') {
    return {
      sent: 'rejected',
      detail: {
        rail: 'custodian',
        status: outcome.status,
        reason: scrubMessage(outcome.reason).slice(0, 300),
      },
    };
  }
  return {
    sent: 'ambiguous',
    detail: { rail: 'custodian', reason: outcome.reason, detail: scrubMessage(outcome.detail).slice(0, 300) },
  };
}

/**
 * The first send of a SIGNED operation by its lease holder. Accepted: BROADCAST. Anything else,
 * a clean refusal included: UNKNOWN, the hold stays and nothing is sent afresh; the reconciler
 * looks at the chain or the custodian before anything else happens (C13, C14).
 */
export async function sendSigned(
  ctx: WorkerContext,
  signed: Operation,
  leaseGeneration: number,
): Promise<Operation> {
  let result: SendResult;
  try {
    result = await sendStoredArtifact(ctx, signed);
  } catch (error) {
    result = {
      sent: 'ambiguous',
      detail: { reason: 'send raised', message: scrubbedError(error, 300) },
    };
  }
  await ctx.probe?.('broadcast-returned', signed.operationId);
  return withTenant(ctx.db, signed.tenantId, async (tx) => {
    if (result.sent === 'accepted') {
      return transition(tx, signed, 'BROADCAST', {
        actor: ctx.workerId,
        reason: 'sent; the rail acknowledged our transaction or reference',
        evidence: result.detail,
        leaseGeneration,
        set: { clearLease: true, ...(result.providerRef ? { providerRef: result.providerRef } : {}) },
      });
    }
    ctx.log.warn(
      { operationId: signed.operationId, outcome: result.sent, evidence: result.detail },
      'send outcome not known: UNKNOWN',
    );
    return transition(tx, signed, 'UNKNOWN', {
      actor: ctx.workerId,
      reason:
        result.sent === 'rejected'
          ? 'the rail refused the send; verifying before anything else'
          : 'no reliable answer to the send',
      evidence: { outcome: result.sent, ...result.detail },
      leaseGeneration,
      set: { clearLease: true },
    });
  });
}

/** The custodian instruction persisted as the artifact: our operation id is the reference. */
export function custodianInstruction(op: Operation): string {
  return JSON.stringify(
    createTransferBodySchema.parse({
      externalReference: op.operationId,
      asset: op.assetCode,
      amountMinor: op.amountMinor,
      destination: op.destination ?? '',
      ...(op.memo ? { memo: op.memo } : {}),
    }),
  );
}
