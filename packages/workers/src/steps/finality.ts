import { scrubbedError } from '@idem/contracts';
import type { Operation } from '@idem/core';
import type { WorkerContext } from '../context.ts';

/**
 * Releasing a withdrawal's hold because our approved cancel took its nonce is final only when the
 * cancel is: a reorganisation deeper than the asset's confirmation depth could swap it for the
 * signed payment, leaving the funds both released and paid. CONFIRMED is re-checked against
 * reorganisations afterwards; a release cannot be taken back once the customer has spent the funds,
 * so it waits for the node's finalized block. A node that cannot say (no answer, no `finalized`
 * tag) makes nothing final: the hold stays. Whatever else took the nonce, the settlement witness
 * waits the same way (the rail's settlement.ts, I32-FINAL), for the automatic release and a
 * person's alike.
 */
export async function isFinal(ctx: WorkerContext, op: Operation, blockNumber: bigint): Promise<boolean> {
  let finalized: bigint;
  try {
    finalized = (await ctx.rails.chain().getBlock({ blockTag: 'finalized' })).number;
  } catch (error) {
    ctx.log.warn(
      { tenantId: op.tenantId, operationId: op.operationId, message: scrubbedError(error, 200) },
      'the node did not say which block is finalized; the hold stays',
    );
    return false;
  }
  if (blockNumber <= finalized) return true;
  ctx.log.info(
    {
      tenantId: op.tenantId,
      operationId: op.operationId,
      blockNumber: blockNumber.toString(),
      finalized: finalized.toString(),
    },
    'the transaction that took the nonce is not final yet; the hold stays',
  );
  return false;
}
