import { IdemError, isIdemError, scrubbedError } from '@idem/contracts';
import {
  allocateNonce,
  approvalOf,
  assertPayloadIntact,
  clearWaiting,
  findOperation,
  leaseForSigning,
  markWaiting,
  type Operation,
  recordSigned,
  takeOverSigned,
  transition,
  withdrawalHeldByFreeze,
  withTenant,
} from '@idem/core';
import { type FeeQuote, type Fees, feesWithinCap } from '@idem/rails';
import { assetOf, candidateIds, lockOne } from '../candidates.ts';
import type { WorkerContext } from '../context.ts';
import { NATIVE_ASSETS, routeFor } from '../rails.ts';
import { custodianInstruction, sendSigned } from './send.ts';

const NATIVE_GAS_LIMIT = 21_000n;
const TOKEN_GAS_LIMIT = 100_000n;

/**
 * Leases APPROVED withdrawals for signing, signs each and persists the signed artifact in the same
 * transaction as the lease (C12), then sends the stored artifact. Before signing, the payload is
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
  // Fees come from the node each time a transaction is signed, read before any row is locked.
  // No answer, no signature this pass: nothing is leased and no nonce is taken.
  let quote: FeeQuote | null = null;
  const peek = await withTenant(ctx.db, tenantId, (tx) => findOperation(tx, tenantId, operationId));
  if (peek && routeFor(peek.network).kind === 'evm') {
    try {
      quote = await ctx.rails.quoteFees();
    } catch (error) {
      ctx.log.warn(
        { tenantId, operationId, message: scrubbedError(error, 200) },
        'fees could not be read from the node; not signing this pass',
      );
      return null;
    }
  }
  try {
    return await withTenant(ctx.db, tenantId, async (tx) => {
      let candidate = await lockOne(tx, tenantId, operationId, 'dispatch', ctx.reorgWindowSeconds);
      if (!candidate) return null;
      assertPayloadIntact(candidate);
      let evm: { fees: Fees; gasLimit: bigint; asset: Awaited<ReturnType<typeof assetOf>> } | null = null;
      if (routeFor(candidate.network).kind === 'evm') {
        if (!quote) return null;
        const asset = await assetOf(tx, candidate);
        const gasLimit = asset.contractAddress ? TOKEN_GAS_LIMIT : NATIVE_GAS_LIMIT;
        // The approved cap is a total in wei of the native asset, whatever asset is withdrawn.
        const verdict = feesWithinCap(quote, ctx.rails.feePolicy(), {
          gasLimit,
          feeCapWei: candidate.feeCapMinor === null ? null : BigInt(candidate.feeCapMinor),
        });
        if (!verdict.ok) {
          // Signed now it would sit unmined and block every later nonce: it waits, visibly.
          if (candidate.state === 'APPROVED') {
            await markWaiting(tx, candidate, {
              reason: verdict.reason,
              actor: ctx.workerId,
              evidence: { ...verdict.detail, quoteBlock: quote.blockNumber.toString() },
            });
          }
          ctx.log.warn({ tenantId, operationId, ...verdict.detail }, verdict.reason);
          return null;
        }
        evm = { fees: verdict.fees, gasLimit, asset };
        if (candidate.state === 'APPROVED' && candidate.waitingReason !== null) {
          candidate = await clearWaiting(tx, candidate, {
            actor: ctx.workerId,
            reason: 'fees are within the approved cap again; signing',
          });
        }
      }
      const leased = await leaseForSigning(tx, {
        operation: candidate,
        workerId: ctx.workerId,
        leaseMs: ctx.leaseMs,
      });
      if (!leased) return null;
      const op = leased.operation;
      assertPayloadIntact(op);
      if (!evm) {
        const operation = await recordSigned(tx, {
          tenantId,
          operationId,
          leaseGeneration: leased.leaseGeneration,
          signedArtifact: custodianInstruction(op),
          txHash: null,
          workerId: ctx.workerId,
        });
        return { operation, leaseGeneration: leased.leaseGeneration };
      }
      const { asset, gasLimit, fees } = evm;
      if (!asset.contractAddress && NATIVE_ASSETS[op.network] !== op.assetCode) {
        // A token without its contract would be sent as the native coin: refuse, and roll the lease back.
        throw new IdemError('VALIDATION', `asset ${op.assetCode} has no token contract configured`);
      }
      const { nonce, wallet } = await allocateNonce(tx, tenantId, op.network);
      const transfer = asset.contractAddress
        ? {
            asset: 'erc20' as const,
            token: asset.contractAddress,
            to: op.destination ?? '',
            amountMinor: op.amountMinor,
          }
        : { asset: 'native' as const, to: op.destination ?? '', amountMinor: op.amountMinor };
      // The signer recomputes the approval's hash and compares the transfer with it before the
      // key is used (C02). Its signature lives only in memory until this transaction commits: a
      // crash or a deadline here leaves nothing that could be broadcast, and the nonce and the
      // lease roll back with it.
      await ctx.probe?.('signing', operationId);
      const signedTx = await ctx.rails.evmFor(wallet).sign(
        {
          transfer,
          nonce,
          gasLimit,
          maxFeePerGas: fees.maxFeePerGas,
          maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        },
        approvalOf(op),
      );
      await ctx.probe?.('signer-answered', operationId);
      const operation = await recordSigned(tx, {
        tenantId,
        operationId,
        leaseGeneration: leased.leaseGeneration,
        signedArtifact: signedTx.rawTransaction,
        txHash: signedTx.txHash,
        chainNonce: nonce,
        workerId: ctx.workerId,
        fees: { gasLimit, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas },
      });
      ctx.log.info(
        {
          tenantId,
          operationId,
          nonce,
          maxFeePerGas: fees.maxFeePerGas.toString(),
          maxPriorityFeePerGas: fees.maxPriorityFeePerGas.toString(),
          baseFeePerGas: quote?.baseFeePerGas.toString(),
        },
        'withdrawal signed; bytes persisted before broadcast',
      );
      return { operation, leaseGeneration: leased.leaseGeneration };
    });
  } catch (error) {
    return afterRefusal(ctx, tenantId, operationId, error);
  }
}

/**
 * What a failed signing leaves: nothing signed was kept (the transaction rolled back). A refusal the
 * worker understands is logged or handed to a person, and the withdrawal waits, APPROVED and held;
 * anything else is rethrown for the stage to log.
 */
async function afterRefusal(
  ctx: WorkerContext,
  tenantId: string,
  operationId: string,
  error: unknown,
): Promise<null> {
  if (isIdemError(error, 'PAYLOAD_MISMATCH')) {
    await refuseTampered(ctx, tenantId, operationId);
    return null;
  }
  if (isIdemError(error, 'SIGNER_UNAVAILABLE')) {
    // Nothing was persisted: the withdrawal stays APPROVED, its funds held, and a later pass
    // signs afresh. A late signature from this call is never used.
    ctx.log.warn(
      { tenantId, operationId, message: scrubbedError(error, 200) },
      'the signer did not answer; nothing signed was kept, signing again on a later pass',
    );
    return null;
  }
  if (error instanceof IdemError && error.details.signerRefusal === 'FROZEN') {
    if (await withTenant(ctx.db, tenantId, (tx) => withdrawalHeldByFreeze(tx, tenantId, operationId))) {
      // A freeze committed between our claim and the signer's read: the last line did its job.
      // Nothing was signed; the claim skips the withdrawal until the freeze is lifted.
      ctx.log.warn(
        { tenantId, operationId },
        'withdrawal held by a freeze placed while it was being signed; nothing signed',
      );
      return null;
    }
    // The signer sees a freeze this worker does not: the two disagree about the database.
    ctx.log.error(
      { alert: true, tenantId, operationId, message: scrubbedError(error) },
      'ALERT the signer refuses a withdrawal as frozen that no freeze here covers',
    );
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

/** The stored payload does not hash to its approval: hold the funds, name an owner, alert. */
async function refuseTampered(ctx: WorkerContext, tenantId: string, operationId: string): Promise<void> {
  await withTenant(ctx.db, tenantId, async (tx) => {
    const candidate = await lockOne(tx, tenantId, operationId, 'dispatch', ctx.reorgWindowSeconds);
    if (!candidate) return;
    const leased = await leaseForSigning(tx, {
      operation: candidate,
      workerId: ctx.workerId,
      leaseMs: ctx.leaseMs,
    });
    if (!leased) return;
    await transition(tx, leased.operation, 'FAILED_TERMINAL', {
      actor: ctx.workerId,
      reason: 'stored payload does not match its approved hash; refused to sign',
      leaseGeneration: leased.leaseGeneration,
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
