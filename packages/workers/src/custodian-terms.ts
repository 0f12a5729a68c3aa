import type { Operation } from '@idem/core';

/** A term of a custodian transfer that must equal the approved withdrawal before it can settle it. */
export type CustodianTerm = 'providerId' | 'asset' | 'amount' | 'destination' | 'memo';

/**
 * The terms in which a custodian transfer under our reference differs from the approved payload
 * (C16): asset, amount, destination and memo, and, once the custodian acknowledged the
 * withdrawal, its own transfer id. An empty list means the transfer is the one we approved; anything
 * else is a genuine variance, never a settlement. The inbox, the worker's evidence and reconciliation
 * all ask here.
 */
export function custodianTermsDiffer(
  op: Operation,
  transfer: {
    id: string;
    asset: string;
    amountMinor: string;
    destination?: string;
    memo?: string | undefined;
  },
): CustodianTerm[] {
  const differs: CustodianTerm[] = [];
  if (op.providerRef !== null && transfer.id !== op.providerRef) differs.push('providerId');
  if (transfer.asset !== op.assetCode) differs.push('asset');
  if (transfer.amountMinor !== op.amountMinor) differs.push('amount');
  if (transfer.destination === undefined || transfer.destination !== op.destination)
    differs.push('destination');
  // No memo and an empty memo are the same instruction (an empty memo is never sent).
  if ((transfer.memo || null) !== (op.memo || null)) differs.push('memo');
  return differs;
}
