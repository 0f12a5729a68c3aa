import { IdemError, type ManualCreditProposal, manualCreditProposalSchema } from '@idem/contracts';
import type { Tx } from '../../db/connect.ts';
import { findByReference } from '../../operations/operation-record.ts';
import { recordDeposit } from '../../operations/record-credit.ts';
import type { ProposalRule } from '../kinds.ts';
import { approvalsByAmount } from '../tiers.ts';
import { assetKnown, proposalOperationKey } from './preconditions.ts';

/**
 * A credit for money that reached custody outside the watched paths (a lost custodian webhook, a
 * deposit to an unwatched address). It is a deposit, with the reference where the money is seen:
 * a reference credited once (by the watcher or by an earlier proposal) is never credited again.
 */
export const manualCreditRule: ProposalRule<ManualCreditProposal> = {
  schema: manualCreditProposalSchema,
  async prepare(tx: Tx, { tenantId, payload }) {
    await assetKnown(tx, tenantId, payload.asset);
    await notCreditedYet(tx, tenantId, payload.reference);
    return { targetOperationId: null, evidence: null };
  },
  approvalsRequired: (tx, { tenantId, payload }) =>
    approvalsByAmount(tx, tenantId, payload.asset, BigInt(payload.amountMinor)),
  approverPermission: 'decide',
  async execute(tx, { proposal, payload, approvers }) {
    await notCreditedYet(tx, proposal.tenantId, payload.reference);
    const claim = await recordDeposit(tx, {
      tenantId: proposal.tenantId,
      deposit: {
        reference: payload.reference,
        accountId: payload.accountId,
        asset: payload.asset,
        amountMinor: payload.amountMinor,
      },
      idempotencyKey: proposalOperationKey(proposal.proposalId),
      actor: proposal.proposedBy,
      evidence: {
        manualCredit: true,
        reason: payload.reason,
        proposalId: proposal.proposalId,
        proposalHash: proposal.payloadHash,
        approvedBy: approvers,
      },
    });
    return { operationId: claim.operation.operationId };
  },
};

async function notCreditedYet(tx: Tx, tenantId: string, reference: string): Promise<void> {
  const credited = await findByReference(tx, tenantId, 'deposit', reference);
  if (credited) {
    throw new IdemError('IDEMPOTENCY_CONFLICT', 'a deposit with this reference is already credited', {
      holderKey: credited.idempotencyKey,
    });
  }
}
