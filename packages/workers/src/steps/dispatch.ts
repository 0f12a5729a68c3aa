import { IdemError, isIdemError, scrubbedError } from '@idem/contracts';
import {
  allocateNonce,
  assertPayloadIntact,
  claim,
  type Operation,
  recordSigned,
  takeOverSigned,
  transition,
  withTenant,
} from '@idem/core';
import { assetOf, candidateIds, lockOne } from '../candidates.ts';
import type { WorkerContext } from '../context.ts';
import { NATIVE_ASSETS, routeFor } from '../rails.ts';
import { custodianInstruction, sendSigned } from './send.ts';

const NATIVE_GAS_LIMIT = 21_000n;
const TOKEN_GAS_LIMIT = 100_000n;

/**
 * Claims APPROVED withdrawals, signs each and persists the signed artifact in the same
 * transaction as the claim (C12), then sends the stored artifact. Before signing, the payload is
 * re-hashed from the stored fields; a mismatch is refused and handed to a person (C02).
 */
export async function dispatchApproved(ctx: WorkerContext, tenantId: string): Promise<number> {
  const ids = await candidateIds(ctx.db, tenantId, 'dispatch', ctx.batchSize, ctx.reorgWindowSeconds);
  let sent = 0;
  for (const operationId of ids) {
    const signed = await signOne(ctx, tenantId, operationId);
    if (!signed) continue;
    await ctx.probe?.('signed', operationId);
    await sendSigned(ctx, signed.operation, signed.leaseGeneration);
    sent += 1;
  }
  return sent;
}

async function signOne(
  ctx: WorkerContext,
  tenantId: string,
  operationId: string,
): Promise<{ operation: Operation; leaseGeneration: number } | null> {
  try {
    return await withTenant(ctx.db, tenantId, async (tx) => {
      const candidate = await lockOne(tx, tenantId, operationId, 'dispatch', ctx.reorgWindowSeconds);
      if (!candidate) return null;
      const claimed = await claim(tx, { operation: candidate, workerId: ctx.workerId, leaseMs: ctx.leaseMs });
      if (!claimed) return null;
      const op = claimed.operation;
      assertPayloadIntact(op);
      if (routeFor(op.network).kind === 'custodian') {
        const operation = await recordSigned(tx, {
          tenantId,
          operationId,
          leaseGeneration: claimed.leaseGeneration,
          signedArtifact: custodianInstruction(op),
          txHash: null,
          workerId: ctx.workerId,
        });
        return { operation, leaseGeneration: claimed.leaseGeneration };
      }
      const asset = await assetOf(tx, op);
      if (!asset.contractAddress && NATIVE_ASSETS[op.network] !== op.assetCode) {
        // A token without its contract would be sent as the native coin: refuse, and roll the claim back.
        throw new IdemError('VALIDATION', `asset ${op.assetCode} has no token contract configured`);
      }
      const { nonce, wallet } = await allocateNonce(tx, tenantId, op.network);
      const gasLimit = asset.contractAddress ? TOKEN_GAS_LIMIT : NATIVE_GAS_LIMIT;
      const fees = ctx.rails.fees();
      // The operation's fee cap, when given, bounds what the transaction may pay in total.
      const maxFeePerGas = op.feeCapMinor
        ? minBigint(fees.maxFeePerGasWei, BigInt(op.feeCapMinor) / gasLimit)
        : fees.maxFeePerGasWei;
      const transfer = asset.contractAddress
        ? {
            asset: 'erc20' as const,
            token: asset.contractAddress,
            to: op.destination ?? '',
            amountMinor: op.amountMinor,
          }
        : { asset: 'native' as const, to: op.destination ?? '', amountMinor: op.amountMinor };
      const maxPriorityFeePerGas = minBigint(fees.maxPriorityFeePerGasWei, maxFeePerGas);
      const signedTx = await ctx.rails.evmFor(wallet).sign({
        transfer,
        nonce,
        gasLimit,
        maxFeePerGas,
        maxPriorityFeePerGas,
      });
      const operation = await recordSigned(tx, {
        tenantId,
        operationId,
        leaseGeneration: claimed.leaseGeneration,
        signedArtifact: signedTx.rawTransaction,
        txHash: signedTx.txHash,
        chainNonce: nonce,
        workerId: ctx.workerId,
        fees: { gasLimit, maxFeePerGas, maxPriorityFeePerGas },
      });
      ctx.log.info({ tenantId, operationId, nonce }, 'withdrawal signed; bytes persisted before broadcast');
      return { operation, leaseGeneration: claimed.leaseGeneration };
    });
  } catch (error) {
    if (isIdemError(error, 'PAYLOAD_MISMATCH')) {
      await refuseTampered(ctx, tenantId, operationId);
      return null;
    }
    if (isIdemError(error, 'VALIDATION')) {
      // A configuration problem, not this withdrawal's: it stays APPROVED, funds held, and we alert.
      ctx.log.error(
        { alert: true, tenantId, operationId, message: scrubbedError(error) },
        'ALERT cannot sign withdrawal',
      );
      return null;
    }
    throw error;
  }
}

/** The stored payload does not hash to its approval: hold the funds, name an owner, alert. */
async function refuseTampered(ctx: WorkerContext, tenantId: string, operationId: string): Promise<void> {
  await withTenant(ctx.db, tenantId, async (tx) => {
    const candidate = await lockOne(tx, tenantId, operationId, 'dispatch', ctx.reorgWindowSeconds);
    if (!candidate) return;
    const claimed = await claim(tx, { operation: candidate, workerId: ctx.workerId, leaseMs: ctx.leaseMs });
    if (!claimed) return;
    await transition(tx, claimed.operation, 'FAILED_TERMINAL', {
      actor: ctx.workerId,
      reason: 'stored payload does not match its approved hash; refused to sign',
      leaseGeneration: claimed.leaseGeneration,
      set: { owner: ctx.escalationOwner, clearLease: true },
    });
  });
  ctx.log.error(
    { alert: true, tenantId, operationId },
    'ALERT payload mismatch before signing; withdrawal held for a person',
  );
}

/**
 * A worker died between persisting the signature and recording the send. Another takes over the
 * lease and sends the stored bytes: never a second signature (C12). Resending bytes the node has
 * already seen is classified as accepted, so exactly one transfer results.
 */
export async function resumeSigned(ctx: WorkerContext, tenantId: string): Promise<number> {
  const ids = await candidateIds(ctx.db, tenantId, 'resume', ctx.batchSize, ctx.reorgWindowSeconds);
  let resumed = 0;
  for (const operationId of ids) {
    const taken = await withTenant(ctx.db, tenantId, async (tx) => {
      const candidate = await lockOne(tx, tenantId, operationId, 'resume', ctx.reorgWindowSeconds);
      return candidate
        ? takeOverSigned(tx, { operation: candidate, workerId: ctx.workerId, leaseMs: ctx.leaseMs })
        : null;
    });
    if (!taken) continue;
    ctx.log.warn({ tenantId, operationId }, 'resuming a signed withdrawal whose worker lost its lease');
    await sendSigned(ctx, taken.operation, taken.leaseGeneration);
    resumed += 1;
  }
  return resumed;
}

function minBigint(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}
