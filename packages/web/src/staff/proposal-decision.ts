import type { PasskeyAssertion, ProposalView } from '@idem/contracts';
import { type PublicKeyCredentialRequestOptionsJSON, startAuthentication } from '@simplewebauthn/browser';
import { api } from '../api.ts';

/**
 * Decides one proposal with the hash shown. A member with an active passkey signs that hash and the
 * decision on this device first (the server's options carry the challenge; none when they have no
 * passkey), as withdrawal approvals are signed (I32-TRUST): the server refuses their decision
 * without it. Every screen that decides a proposal goes through here.
 */
export async function decideProposal(
  proposal: Pick<ProposalView, 'proposalId' | 'payloadHash'>,
  decision: 'approve' | 'reject',
  reason?: string,
) {
  const bound = { proposalId: proposal.proposalId, payloadHash: proposal.payloadHash, decision };
  const optionsJSON = (await api.staffPasskeys.proposalOptions.query(
    bound,
  )) as unknown as PublicKeyCredentialRequestOptionsJSON | null;
  const assertion = optionsJSON ? await startAuthentication({ optionsJSON }) : null;
  return api.staffProposals.decide.mutate({
    ...bound,
    ...(reason?.trim() ? { reason: reason.trim() } : {}),
    ...(assertion ? { assertion: assertion as PasskeyAssertion } : {}),
  });
}
