import type { Operation, SettlementAttestation } from '@idem/core';

/**
 * Where the server asks the authoritative source (the chain, the custodian) about a withdrawal a
 * person wants to resolve: once when the resolution is proposed (the answer is bound into what the
 * approvers see) and again just before the deciding approval. It never throws: an unreachable or
 * undecided source answers UNPROVEN, which releases and confirms nothing.
 */
export interface SettlementWitness {
  attest(
    op: Operation,
    claim: { toState: 'CONFIRMED' | 'VERIFIED_NOT_SENT'; txHash?: string | undefined },
  ): Promise<SettlementAttestation>;
}

/** The witness of a server with no rail configured: nothing can be proven. */
export const noRailWitness: SettlementWitness = {
  attest: async () => ({
    verdict: 'UNPROVEN',
    source: 'chain',
    txHash: null,
    observedAt: new Date().toISOString(),
    detail: { reason: 'no rail is configured on this server' },
  }),
};
