import { IdemError } from '@idem/contracts';
import { and, eq, isNull } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { operations } from '../db/schema/index.ts';
import type { Operation } from '../operations/operation-record.ts';
import { transition } from '../state-machine/transition.ts';

/** The rejection code of a withdrawal staff stopped after approval, before any worker signed it. */
export const STOPPED_BY_STAFF = 'STOPPED_BY_STAFF';
export const STOP_REASON_MIN = 10;

/**
 * Stop before signing: staff take back an APPROVED withdrawal that no worker has
 * leased (fraud found after approval, the customer's request). APPROVED -> REJECTED releases the
 * hold through the transition's ledger effect. Stopping only lowers risk, so one person suffices.
 *
 * It never races a worker: the row is locked first, and the conditional UPDATE requires state
 * APPROVED (and no lease, no signed bytes). A claim committed first leaves SIGNING, which is refused
 * as being signed; a claim arriving after waits on the lock and then matches nothing.
 */
export async function stopWithdrawal(
  tx: Tx,
  input: { tenantId: string; operationId: string; actor: string; reason: string },
): Promise<Operation> {
  const reason = input.reason.trim();
  if (reason.length < STOP_REASON_MIN) {
    throw new IdemError('VALIDATION', `a stop needs a reason of at least ${STOP_REASON_MIN} characters`);
  }
  const rows = await tx
    .select()
    .from(operations)
    .where(and(eq(operations.tenantId, input.tenantId), eq(operations.operationId, input.operationId)))
    .for('update');
  const op = rows[0] as Operation | undefined;
  if (!op) throw new IdemError('NOT_FOUND', 'operation not found');
  if (op.kind !== 'withdrawal') throw new IdemError('INVALID_TRANSITION', 'only withdrawals can be stopped');
  if (op.state === 'SIGNING') {
    throw new IdemError(
      'INVALID_TRANSITION',
      'the withdrawal is being signed by a worker and can no longer be stopped; if it is not sent, reconciliation releases it',
    );
  }
  if (op.state !== 'APPROVED') {
    throw new IdemError(
      'INVALID_TRANSITION',
      `the withdrawal is ${op.state}; only an APPROVED withdrawal that no worker has signed can be stopped`,
    );
  }
  return transition(tx, op, 'REJECTED', {
    actor: input.actor,
    reason: `stopped before signing: ${reason}`,
    evidence: { stoppedBy: input.actor, reason, payloadHash: op.payloadHash },
    set: { rejectionCode: STOPPED_BY_STAFF },
    // Asserted in the write itself: nothing signed, no worker holding it.
    where: [isNull(operations.signedArtifact), isNull(operations.leaseOwner)],
  });
}
