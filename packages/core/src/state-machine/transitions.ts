import type { OperationKind, OperationState } from '@idem/contracts';

/**
 * The closed transition table (seed 000). Anything not listed is refused with INVALID_TRANSITION.
 * Each edge names its ledger effect (seed 003's postings), so the journal follows the state
 * machine from one place:
 * - release: held back to available (the money verifiably did not leave);
 * - settle: held consumed into the custody control account (it left, and is confirmed);
 * - unsettle: a reorganisation undid a confirmation, so the settle is reversed (C17);
 * - reverse_credit: a credited deposit was undone by a reorganisation; a compensating entry takes
 *   the credit back (nothing is edited);
 * - none: nothing moves; in particular UNKNOWN keeps the hold (C13).
 */
export type LedgerEffect = 'none' | 'release' | 'settle' | 'unsettle' | 'reverse_credit';

interface Edge {
  to: OperationState;
  effect: LedgerEffect;
}

const withdrawalEdges: Partial<Record<OperationState, Edge[]>> = {
  REQUESTED: [
    { to: 'APPROVED', effect: 'none' },
    { to: 'REJECTED', effect: 'release' },
  ],
  APPROVED: [
    // Only through `leaseForSigning`, which sets the lease.
    { to: 'SIGNING', effect: 'none' },
    // Stop before signing (staff/stop-withdrawal.ts): nothing was signed, so the hold goes back.
    { to: 'REJECTED', effect: 'release' },
  ],
  SIGNING: [
    { to: 'SIGNED', effect: 'none' },
    // Only while nothing is signed; `releaseLease` checks the artifact in its WHERE clause.
    { to: 'APPROVED', effect: 'none' },
    // The signer found the stored payload no longer matches its approved hash (C02): a person
    // must look. Nothing was signed; the hold stays.
    { to: 'FAILED_TERMINAL', effect: 'none' },
  ],
  SIGNED: [
    { to: 'BROADCAST', effect: 'none' },
    { to: 'UNKNOWN', effect: 'none' },
  ],
  BROADCAST: [
    { to: 'CONFIRMED', effect: 'settle' },
    { to: 'UNKNOWN', effect: 'none' },
    { to: 'FAILED_TERMINAL', effect: 'none' },
    // Only on our own approved cancel attempt mined at the asset's depth: the nonce is
    // spent by a zero-value transaction to ourselves, so the payment can never be mined.
    { to: 'VERIFIED_NOT_SENT', effect: 'release' },
  ],
  UNKNOWN: [
    { to: 'BROADCAST', effect: 'none' },
    { to: 'CONFIRMED', effect: 'settle' },
    { to: 'VERIFIED_NOT_SENT', effect: 'release' },
  ],
  // A reorganisation removed the confirmed transaction: back to BROADCAST, re-evaluated (C17).
  CONFIRMED: [{ to: 'BROADCAST', effect: 'unsettle' }],
  // Manual resolution only, by a named owner with evidence (C15).
  FAILED_TERMINAL: [
    { to: 'CONFIRMED', effect: 'settle' },
    { to: 'VERIFIED_NOT_SENT', effect: 'release' },
  ],
};

/**
 * Deposits are recorded once confirmed to the asset's depth; a reorganisation after crediting
 * reverses them by a compensating entry. Adjustments are final.
 */
const tables: Record<OperationKind, Partial<Record<OperationState, Edge[]>>> = {
  withdrawal: withdrawalEdges,
  deposit: { CONFIRMED: [{ to: 'REVERSED', effect: 'reverse_credit' }] },
  adjustment: {},
};

export function findEdge(kind: OperationKind, from: OperationState, to: OperationState): Edge | undefined {
  return tables[kind][from]?.find((edge) => edge.to === to);
}

export function allowedNext(kind: OperationKind, from: OperationState): OperationState[] {
  return (tables[kind][from] ?? []).map((edge) => edge.to);
}

/**
 * States whose outcome is settled for good: a key may expire only from these (C07). FAILED_TERMINAL
 * is not one of them: it still holds funds and awaits a person.
 */
export const SETTLED_STATES: readonly OperationState[] = ['REJECTED', 'CONFIRMED', 'VERIFIED_NOT_SENT'];

/** States in which the customer's funds must be held (the property test checks this). */
export const HOLDING_STATES: readonly OperationState[] = [
  'REQUESTED',
  'APPROVED',
  'SIGNING',
  'SIGNED',
  'BROADCAST',
  'UNKNOWN',
  'FAILED_TERMINAL',
];

/** States in which the money-moving outcome is not known: a replay answers IN_FLIGHT (C05). */
export const IN_FLIGHT_STATES: readonly OperationState[] = ['UNKNOWN'];
