import type { Database, Operation, SettlementAttestation } from '@idem/core';
import { attestSettlement, type RailRegistry, routeFor } from '@idem/workers';

/**
 * Where the server asks the authoritative source (the chain, the custodian) about a withdrawal a
 * person wants to resolve: once when the resolution is proposed (the answer is bound into what the
 * approvers see) and again just before the deciding approval. It never throws: an unreachable or
 * undecided source answers UNPROVEN, which releases and confirms nothing.
 */
export interface SettlementWitness {
  attest(
    op: Operation,
    assertion: { toState: 'CONFIRMED' | 'VERIFIED_NOT_SENT'; txHash?: string | undefined },
  ): Promise<SettlementAttestation>;
  /** The chain's nonce counts for a hot wallet (the nonce view); null when no node answers. */
  readNonces?(address: string, network: string): Promise<{ latest: number; pending: number } | null>;
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

/** The witness of a server with rails: the chain at the asset's depth, or the custodian by reference. */
export function railWitness(db: Database, rails: RailRegistry): SettlementWitness {
  return {
    attest: (op, assertion) => attestSettlement({ db, rails }, op, assertion),
    readNonces: async (address, network) =>
      routeFor(network).kind === 'evm' && rails.config.evm
        ? rails.evmReader().readNonces(address as `0x${string}`)
        : null,
  };
}
