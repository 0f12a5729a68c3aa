/**
 * What the settlement witness's reasons mean, in the words a staff member reads beside the code:
 * on a resolution proposal's evidence and in the refusal of an approval it does not prove. The
 * codes come from the EVM rail's settlement proof and the witness that asks the chain or the
 * custodian (C14, C15, I11-F4); a code not listed here is shown as it is.
 */
const SETTLEMENT_REASONS: Readonly<Record<string, string>> = {
  // Proven: nothing of ours can still be paid.
  never_signed: 'nothing was ever signed for this withdrawal',
  nonce_consumed_by_other: 'another transaction took our nonce, and it is final',
  reverted_at_depth: 'our transaction reverted, and its block is final',
  no_record_for_reference: 'the custodian has no record of our reference',
  failed_at_custodian: 'the custodian reports the transfer failed',
  // Proven: paid.
  our_transaction_mined: 'our transaction is mined with the approved terms',
  named_transaction_mined: 'the named transaction is mined with the approved terms',
  completed: 'the custodian reports the transfer completed',
  // Not proven (yet).
  not_final: 'the transaction that took the nonce is not final yet',
  finalized_block_unknown: 'the node did not say which block is finalized',
  nonce_not_consumed_at_depth:
    'our nonce is not taken at the confirmation depth: the stored transaction could still be mined',
  nonce_consumed_by_ours: 'one of our own transactions took the nonce: it was sent',
  reverted_not_deep_enough: 'our transaction reverted, but is not yet at the confirmation depth',
  chain_shorter_than_depth: 'the chain is shorter than the confirmation depth',
  no_transaction_named: 'no transaction is named',
  not_mined: 'the transaction is not mined',
  reverted: 'the transaction reverted',
  not_deep_enough: 'the transaction is not yet at the confirmation depth',
  sender_differs: 'the transaction was not sent by the hot wallet',
  destination_differs: 'the transaction paid another destination',
  amount_differs: 'the transaction paid another amount',
  token_differs: 'the transaction moved another token',
  token_transfer_not_found: 'the transaction shows no single token transfer from the hot wallet',
  our_transaction_still_mineable: 'our stored transaction could still be mined as well',
  stored_artifact_incomplete: 'the stored transaction lacks its hash or nonce',
  network_fee_unreadable: 'the paying transaction’s network fee could not be read',
  rail_unreachable: 'the chain or custodian did not answer',
  several_transfers_for_reference: 'the custodian holds several transfers under our reference',
  terms_differ: 'the custodian’s transfer has other terms',
  still_in_progress: 'the custodian’s transfer is still in progress',
};

/** The settlement reason in words, or the code itself when it has none. */
export function describeSettlementReason(reason: string): string {
  return SETTLEMENT_REASONS[reason] ?? reason;
}
