import { IdemError } from '@idem/contracts';
import type { Tx } from '../db/connect.ts';
import { getOperation, type Operation } from '../operations/operation-record.ts';
import { assignOwner } from '../state-machine/assign-owner.ts';

const NEEDS_A_PERSON = ['UNKNOWN', 'FAILED_TERMINAL'] as const;

function needsAPerson(op: Operation): void {
  if (op.kind !== 'withdrawal' || !(NEEDS_A_PERSON as readonly string[]).includes(op.state)) {
    throw new IdemError(
      'INVALID_TRANSITION',
      `only UNKNOWN or FAILED_TERMINAL withdrawals take runbook actions`,
    );
  }
}

/** Escalates: names the accountable owner. The history records who, why, and the previous owner. */
export async function escalateOperation(
  tx: Tx,
  input: { tenantId: string; operationId: string; owner: string; reason: string; actor: string },
): Promise<Operation> {
  const op = await getOperation(tx, input.tenantId, input.operationId);
  needsAPerson(op);
  return assignOwner(tx, op, {
    owner: input.owner,
    actor: input.actor,
    reason: input.reason,
    evidence: { previousOwner: op.owner },
  });
}

// Resolving (CONFIRMED / VERIFIED_NOT_SENT) is no runbook action of one person: it is a proposal
// another staff member approves, with the rail's proof (proposals/kinds/resolve-withdrawal.ts).
