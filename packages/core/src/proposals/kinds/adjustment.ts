import { type AdjustmentProposal, adjustmentProposalSchema } from '@idem/contracts';
import type { Tx } from '../../db/connect.ts';
import { getBalances } from '../../journal/balances.ts';
import { recordAdjustment } from '../../operations/record-credit.ts';
import type { ProposalRule } from '../kinds.ts';
import { approvalsByAmount } from '../tiers.ts';
import { assetKnown, proposalOperationKey } from './preconditions.ts';

/**
 * A correction of one account's available balance against the adjustments account. The approvers
 * see the balance at the time of the proposal; a debit still never overdraws (C08): if the funds
 * are gone when the last approval arrives, the approval is refused and nothing is recorded.
 */
export const adjustmentRule: ProposalRule<AdjustmentProposal> = {
  schema: adjustmentProposalSchema,
  async prepare(tx: Tx, { tenantId, payload }) {
    await assetKnown(tx, tenantId, payload.asset);
    const balance = (await getBalances(tx, tenantId, payload.accountId)).find(
      (b) => b.asset === payload.asset,
    );
    return {
      targetOperationId: null,
      evidence: { balanceAtProposal: { available: balance?.available ?? '0', held: balance?.held ?? '0' } },
    };
  },
  approvalsRequired: (tx, { tenantId, payload }) =>
    approvalsByAmount(tx, tenantId, payload.asset, BigInt(payload.amountMinor)),
  approverPermission: 'decide',
  async execute(tx, { proposal, payload, approvers }) {
    const key = proposalOperationKey(proposal.proposalId);
    const claim = await recordAdjustment(tx, {
      tenantId: proposal.tenantId,
      adjustment: {
        reference: key,
        accountId: payload.accountId,
        asset: payload.asset,
        amountMinor: payload.amountMinor,
        reason: payload.reason,
      },
      idempotencyKey: key,
      actor: proposal.proposedBy,
      evidence: {
        proposalId: proposal.proposalId,
        proposalHash: proposal.payloadHash,
        approvedBy: approvers,
      },
    });
    return { operationId: claim.operation.operationId };
  },
};
