import { IdemError } from '@idem/contracts';
import type { Tx } from '../db/connect.ts';
import { getOperation, type Operation } from '../operations/operation-record.ts';
import { assignOwner } from '../state-machine/assign-owner.ts';
import { transition } from '../state-machine/transition.ts';

export interface RunbookEvidence {
  summary: string;
  txHash?: string | undefined;
  custodianRecord?: string | undefined;
}

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

/**
 * Resolves a withdrawal a person has investigated (C14, C15): CONFIRMED settles the hold (the money
 * left: evidence must name the transaction), VERIFIED_NOT_SENT releases it (evidence must say how it
 * was verified that nothing was sent). The transition table decides which moves exist.
 */
export async function resolveOperation(
  tx: Tx,
  input: {
    tenantId: string;
    operationId: string;
    toState: 'CONFIRMED' | 'VERIFIED_NOT_SENT';
    evidence: RunbookEvidence;
    actor: string;
  },
): Promise<Operation> {
  const op = await getOperation(tx, input.tenantId, input.operationId);
  needsAPerson(op);
  if (input.evidence.summary.trim().length < 10) {
    throw new IdemError('VALIDATION', 'resolving needs evidence: say what was checked');
  }
  const txHash = input.evidence.txHash ?? op.txHash ?? undefined;
  if (input.toState === 'CONFIRMED' && !txHash) {
    throw new IdemError('VALIDATION', 'confirming needs the transaction hash found on the chain', {
      issues: [{ path: 'evidence.txHash', message: 'required to confirm' }],
    });
  }
  const evidence = { ...input.evidence, resolvedFrom: op.state };
  return transition(tx, op, input.toState, {
    actor: input.actor,
    reason: `manual resolution from ${op.state}: ${input.evidence.summary}`,
    evidence,
    ...(input.toState === 'CONFIRMED' && txHash && !op.txHash ? { set: { txHash } } : {}),
  });
}
