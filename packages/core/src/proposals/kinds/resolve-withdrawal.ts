import {
  describeSettlementReason,
  IdemError,
  type ResolveWithdrawalProposal,
  resolveWithdrawalProposalSchema,
} from '@idem/contracts';
import { z } from 'zod';
import type { Tx } from '../../db/connect.ts';
import { getOperation, type Operation } from '../../operations/operation-record.ts';
import { transition } from '../../state-machine/transition.ts';
import type { ProposalRule } from '../kinds.ts';
import { approvalsForOperation } from '../tiers.ts';

/**
 * What the authoritative source says about a withdrawal, read by the rail just before the
 * deciding approval (the server gathers it; core only judges it):
 * - PAID: the transaction is found with the approved terms at the asset's confirmation depth (or
 *   the custodian reports it completed), naming the transaction;
 * - NOT_SENT: nothing of ours can still be paid (EVM: the nonce is consumed at depth by a
 *   transaction that is not ours, and that transaction is final, I32-FINAL; custodian: its
 *   authoritative "no record" for our reference);
 * - UNPROVEN: anything else, including an unreachable source.
 */
export const settlementAttestationSchema = z.object({
  verdict: z.enum(['PAID', 'NOT_SENT', 'UNPROVEN']),
  source: z.enum(['chain', 'custodian']),
  txHash: z.string().nullable(),
  observedAt: z.string(),
  detail: z.record(z.string(), z.unknown()),
});
export type SettlementAttestation = z.infer<typeof settlementAttestationSchema>;

const NEEDS_A_PERSON = ['UNKNOWN', 'FAILED_TERMINAL'] as const;

/** The verdict and, when the source gave one, its reason in words: what a refused approver reads. */
function verdictOf(answer: SettlementAttestation): string {
  const reason = answer.detail.reason;
  return typeof reason === 'string'
    ? `${answer.verdict}: ${describeSettlementReason(reason)}`
    : answer.verdict;
}

function needsAPerson(op: Operation): void {
  if (op.kind !== 'withdrawal' || !(NEEDS_A_PERSON as readonly string[]).includes(op.state)) {
    throw new IdemError(
      'INVALID_TRANSITION',
      'only UNKNOWN or FAILED_TERMINAL withdrawals are resolved by people',
    );
  }
}

/**
 * A person's resolution of a stuck withdrawal (C14, C15), four eyes and never on a person's word
 * alone: releasing the hold needs the rail to show that nothing of ours can still be paid, and
 * confirming needs the paying transaction found with the approved terms. The approvers see the
 * operation and the rail's answer as they were when it was proposed (bound into the hash); the
 * deciding approval needs a fresh answer that still says so.
 */
export const resolveWithdrawalRule: ProposalRule<ResolveWithdrawalProposal> = {
  schema: resolveWithdrawalProposalSchema,
  async prepare(tx: Tx, { tenantId, payload, gathered }) {
    const op = await getOperation(tx, tenantId, payload.operationId);
    needsAPerson(op);
    return {
      targetOperationId: op.operationId,
      evidence: {
        operation: {
          state: op.state,
          payloadHash: op.payloadHash,
          txHash: op.txHash,
          chainNonce: op.chainNonce,
          providerRef: op.providerRef,
          owner: op.owner,
        },
        rail: gathered,
      },
    };
  },
  approvalsRequired: (tx, { tenantId, payload }) => approvalsForOperation(tx, tenantId, payload.operationId),
  approverPermission: 'decide',
  async execute(tx, { proposal, payload, approvers, attestation }) {
    const op = await getOperation(tx, proposal.tenantId, payload.operationId);
    needsAPerson(op);
    const shown = (proposal.evidence as { operation?: { state?: string; payloadHash?: string } } | null)
      ?.operation;
    if (shown?.state !== op.state || shown.payloadHash !== op.payloadHash) {
      throw new IdemError(
        'STALE_WRITE',
        `the withdrawal is now ${op.state}; the proposal described another state`,
      );
    }
    const fresh = settlementAttestationSchema.safeParse(attestation);
    if (!fresh.success) {
      throw new IdemError(
        'UNPROVEN',
        'no fresh answer from the chain or custodian was gathered for this decision',
      );
    }
    const answer = fresh.data;
    const assertedHash = payload.txHash ?? op.txHash;
    if (payload.toState === 'VERIFIED_NOT_SENT' && answer.verdict !== 'NOT_SENT') {
      throw new IdemError(
        'UNPROVEN',
        `the ${answer.source} does not show that nothing can still be paid (${verdictOf(answer)})`,
      );
    }
    if (payload.toState === 'CONFIRMED') {
      if (answer.verdict !== 'PAID') {
        throw new IdemError(
          'UNPROVEN',
          `the ${answer.source} does not show this withdrawal paid (${verdictOf(answer)})`,
        );
      }
      if (assertedHash && answer.txHash && answer.txHash.toLowerCase() !== assertedHash.toLowerCase()) {
        throw new IdemError('UNPROVEN', 'the transaction found is not the one proposed');
      }
    }
    const txHash = answer.txHash ?? assertedHash;
    const networkFee = payload.toState === 'CONFIRMED' ? paidNetworkFee(answer) : undefined;
    const moved = await transition(tx, op, payload.toState, {
      actor: proposal.proposedBy,
      reason: `manual resolution from ${op.state}, four eyes (${approvers.join(', ')}): ${payload.summary}`,
      evidence: {
        proposalId: proposal.proposalId,
        proposalHash: proposal.payloadHash,
        approvedBy: approvers,
        attestation: answer,
        resolvedFrom: op.state,
      },
      ...(payload.toState === 'CONFIRMED' && txHash && !op.txHash ? { set: { txHash } } : {}),
      ...(networkFee ? { networkFee } : {}),
    });
    return { operationId: moved.operationId, state: moved.state };
  },
};

/**
 * The gas a chain payment confirmed by hand paid, as the rail read it from the receipt: posted
 * with the confirmation like the watcher's. A chain PAID without it proves nothing yet;
 * a custodian charges its own fee.
 */
function paidNetworkFee(
  answer: SettlementAttestation,
): { assetCode: string; amountMinor: bigint } | undefined {
  if (answer.source !== 'chain') return undefined;
  const { networkFeeAsset, networkFeeMinor } = answer.detail;
  if (
    typeof networkFeeAsset !== 'string' ||
    typeof networkFeeMinor !== 'string' ||
    !/^[0-9]{1,78}$/.test(networkFeeMinor)
  ) {
    throw new IdemError('UNPROVEN', 'the chain did not report the gas the payment paid; nothing was changed');
  }
  return { assetCode: networkFeeAsset, amountMinor: BigInt(networkFeeMinor) };
}
