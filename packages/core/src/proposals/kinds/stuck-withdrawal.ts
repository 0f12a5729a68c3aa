import {
  type CancelWithdrawalProposal,
  cancelWithdrawalProposalSchema,
  IdemError,
  type RaiseFeeCapProposal,
  raiseFeeCapProposalSchema,
} from '@idem/contracts';
import { payloadHash } from '@idem/contracts/payload';
import { approvedCancel, attemptHashes, feeCapInForce, noteOnHistory } from '../../attempts/attempts.ts';
import type { Tx } from '../../db/connect.ts';
import { getOperation, type Operation } from '../../operations/operation-record.ts';
import type { ProposalRule } from '../kinds.ts';
import type { ProposalRecord } from '../record.ts';
import { approvalsForOperation } from '../tiers.ts';

/** Only a signed chain withdrawal that is sent and not settled can be replaced or cancelled. */
function replaceable(op: Operation): void {
  if (op.kind !== 'withdrawal' || !['BROADCAST', 'UNKNOWN'].includes(op.state)) {
    throw new IdemError(
      'INVALID_TRANSITION',
      `only a BROADCAST or UNKNOWN withdrawal can be cancelled or re-capped (this one is ${op.state})`,
    );
  }
  if (op.chainNonce === null || !op.txHash) {
    throw new IdemError('INVALID_TRANSITION', 'only a signed chain transaction has a nonce to replace');
  }
}

/** The operation as the approvers saw it; a different one by the last approval refuses the action. */
function shownOperation(op: Operation) {
  return { state: op.state, payloadHash: op.payloadHash, chainNonce: op.chainNonce, txHash: op.txHash };
}

function stillAsShown(proposal: ProposalRecord, op: Operation): void {
  const shown = (proposal.evidence as { operation?: { payloadHash?: string; chainNonce?: number } } | null)
    ?.operation;
  if (shown?.payloadHash !== op.payloadHash || shown.chainNonce !== op.chainNonce) {
    throw new IdemError('STALE_WRITE', 'the withdrawal is not the one the proposal described');
  }
}

/**
 * A cancel, four eyes. Executing it records the approved intent only (in the operation's history;
 * the executed proposal is itself immutable): signing needs the hot wallet's key, so the worker
 * signs the cancel attempt on its next pass and records it before broadcasting it.
 */
export const cancelWithdrawalRule: ProposalRule<CancelWithdrawalProposal> = {
  schema: cancelWithdrawalProposalSchema,
  async prepare(tx: Tx, { tenantId, payload }) {
    const op = await getOperation(tx, tenantId, payload.operationId);
    replaceable(op);
    if (await approvedCancel(tx, op)) {
      throw new IdemError('INVALID_TRANSITION', 'a cancel of this withdrawal is already approved');
    }
    return {
      targetOperationId: op.operationId,
      evidence: {
        operation: shownOperation(op),
        attemptHashes: await attemptHashes(tx, tenantId, op.operationId),
      },
    };
  },
  approvalsRequired: (tx, { tenantId, payload }) => approvalsForOperation(tx, tenantId, payload.operationId),
  approverPermission: 'decide',
  async execute(tx, { proposal, payload, approvers }) {
    const op = await getOperation(tx, proposal.tenantId, payload.operationId);
    replaceable(op);
    stillAsShown(proposal, op);
    await noteOnHistory(tx, op, {
      actor: proposal.proposedBy,
      reason: `cancel approved, four eyes (${approvers.join(', ')}): ${payload.reason}`,
      evidence: {
        proposalId: proposal.proposalId,
        proposalHash: proposal.payloadHash,
        approvedBy: approvers,
      },
    });
    return { operationId: op.operationId, cancel: 'approved; the worker signs and broadcasts it' };
  },
};

/**
 * A new fee cap, four eyes. The operation's approved payload and its hash are immutable, so the new
 * cap lives in this executed (immutable) proposal, and the history records it with the payload
 * hash it amounts to: the approved payload with the new cap, hashed the same way, and its version
 * (the withdrawal's own approval is version 0, each raise the next).
 */
export const raiseFeeCapRule: ProposalRule<RaiseFeeCapProposal> = {
  schema: raiseFeeCapProposalSchema,
  async prepare(tx: Tx, { tenantId, payload }) {
    const op = await getOperation(tx, tenantId, payload.operationId);
    replaceable(op);
    const cap = await feeCapInForce(tx, op);
    if (cap.capMinor !== null && BigInt(payload.feeCapMinor) <= cap.capMinor) {
      throw new IdemError('VALIDATION', `the new cap must exceed the cap in force (${cap.capMinor})`);
    }
    return {
      targetOperationId: op.operationId,
      evidence: {
        operation: shownOperation(op),
        capInForce: { capMinor: cap.capMinor?.toString() ?? null, version: cap.version },
      },
    };
  },
  approvalsRequired: (tx, { tenantId, payload }) => approvalsForOperation(tx, tenantId, payload.operationId),
  approverPermission: 'decide',
  async execute(tx, { proposal, payload, approvers }) {
    const op = await getOperation(tx, proposal.tenantId, payload.operationId);
    replaceable(op);
    stillAsShown(proposal, op);
    const cap = await feeCapInForce(tx, op);
    if (cap.capMinor !== null && BigInt(payload.feeCapMinor) <= cap.capMinor) {
      throw new IdemError('STALE_WRITE', `a higher cap (${cap.capMinor}) was approved meanwhile`);
    }
    const version = cap.version + 1;
    const newHash = payloadHash({
      tenantId: op.tenantId,
      kind: op.kind,
      reference: op.reference,
      accountRef: op.accountRef,
      assetCode: op.assetCode,
      network: op.network,
      destination: op.destination,
      memo: op.memo,
      amountMinor: op.amountMinor,
      feeCapMinor: payload.feeCapMinor,
      policyVersion: op.policyVersion,
    });
    await noteOnHistory(tx, op, {
      actor: proposal.proposedBy,
      reason: `fee cap raised to ${payload.feeCapMinor}, four eyes (${approvers.join(', ')}): ${payload.reason}`,
      evidence: {
        proposalId: proposal.proposalId,
        approvedBy: approvers,
        feeCapMinor: payload.feeCapMinor,
        previousCapMinor: cap.capMinor?.toString() ?? null,
        payloadHashVersion: version,
        payloadHash: newHash,
        originalPayloadHash: op.payloadHash,
      },
    });
    return { operationId: op.operationId, feeCapMinor: payload.feeCapMinor, payloadHashVersion: version };
  },
};
