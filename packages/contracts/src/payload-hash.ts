// The approved payload and its hash (C02). Node only (node:crypto): the web bundle never imports
// this subpath; core hashes at creation and the signer in rails recomputes before it signs.
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/**
 * The approved payload (C02): the fields an approval covers. No timestamps, request ids or state.
 * Amounts are strings in minor units. `kind` and `reference` are included so that one key can
 * never stand for a different withdrawal id either.
 */
export interface ApprovedPayload {
  tenantId: string;
  kind: string;
  reference: string;
  accountRef: string;
  assetCode: string;
  network: string;
  destination: string | null;
  memo: string | null;
  amountMinor: string;
  feeCapMinor: string | null;
  policyVersion: number;
}

/** SHA-256 (hex) of the RFC 8785 canonical JSON of the payload. */
export function payloadHash(payload: ApprovedPayload): string {
  const canonical = canonicalize({
    tenantId: payload.tenantId,
    kind: payload.kind,
    reference: payload.reference,
    accountRef: payload.accountRef,
    assetCode: payload.assetCode,
    network: payload.network,
    destination: payload.destination,
    memo: payload.memo,
    amountMinor: payload.amountMinor,
    feeCapMinor: payload.feeCapMinor,
    policyVersion: payload.policyVersion,
  });
  if (canonical === undefined) throw new Error('payload could not be canonicalised');
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}
