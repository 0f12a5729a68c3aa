import { type ApprovedPayload, payloadHash } from '@idem/contracts/payload';
import type { Approval } from '@idem/rails';

/**
 * An approval that covers exactly this transfer (C02), as the ledger would have stored it: the
 * signer recomputes its hash and compares the transfer with it before any key is used.
 */
export function approvalFor(
  transfer: { to: string; amountMinor: bigint | string },
  overrides: Partial<ApprovedPayload> = {},
): Approval {
  const payload: ApprovedPayload = {
    tenantId: '00000000-0000-4000-8000-000000000001',
    kind: 'withdrawal',
    reference: `wd-${transfer.to.slice(2, 10)}-${String(transfer.amountMinor)}`,
    accountRef: 'acct-1',
    assetCode: 'ETH',
    network: 'ethereum',
    destination: transfer.to,
    memo: null,
    amountMinor: String(transfer.amountMinor),
    feeCapMinor: null,
    policyVersion: 1,
    ...overrides,
  };
  return { payload, payloadHash: payloadHash(payload) };
}
