/**
 * The signer interface. A hot wallet's key lives behind a `DigestSigner`: a PKCS#11
 * token in production (pkcs11.ts), an in-process key only on development chains (local-key.ts),
 * and a KMS or an MPC provider the same way (docs/SIGNING.md). The rail never holds key material:
 * it checks what the approval covers (C02), builds the transaction, sends its 32-byte digest to
 * the signer under a deadline, and assembles the signed bytes. Those bytes count only once the
 * caller persisted them (recordSigned); a signature that arrives after the deadline is dropped.
 */
import { IdemError } from '@idem/contracts';
import { type ApprovedPayload, payloadHash } from '@idem/contracts/payload';
import {
  type Address,
  getAddress,
  type Hex,
  keccak256,
  recoverAddress,
  serializeTransaction,
  type TransactionSerializableEIP1559,
} from 'viem';

/** An ECDSA signature over secp256k1 as Ethereum uses it: `s` in the low half, the recovery bit. */
export interface DigestSignature {
  r: Hex;
  s: Hex;
  yParity: 0 | 1;
}

/**
 * Whatever holds one hot wallet's key: an HSM, a KMS, an MPC provider, or (development only) the
 * process itself. It signs 32-byte digests and nothing else; it never hands out the key.
 */
export interface DigestSigner {
  /** The address derived from the key's public key (read from the key holder, never configured). */
  readonly address: Address;
  /** Where the key lives, for operators and logs; never key material or a PIN. */
  readonly location: string;
  signDigest(digest: Hex): Promise<DigestSignature>;
  /**
   * A signer that checks what it signs itself (the signer service, docs/SIGNING.md) takes the
   * unsigned transaction and what it is for instead of a digest. When present, the rail calls
   * this and never `signDigest`.
   */
  signTransaction?(unsignedTransaction: Hex, context: SigningContext): Promise<DigestSignature>;
}

/** What a signature is for: a withdrawal's first payment, a fee bump of it, or a cancel of it. */
export type SigningKind = 'payment' | 'replacement' | 'cancel';

/** The operation a transaction is signed for, for a signer that verifies it against the database. */
export interface SigningContext {
  tenantId: string;
  operationId: string;
  kind: SigningKind;
}

/** What an approval covers (C02): the operation's stored fields and the hash that was approved. */
export interface Approval {
  payload: ApprovedPayload;
  payloadHash: string;
  /** The operation approved; a signer service needs it to read the approval itself. */
  operationId?: string;
}

/** The transfer a transaction makes, as the rail decoded or built it. */
export interface ApprovedTransfer {
  to: Address;
  amountMinor: bigint;
}

/** Deadline of one signer call when the caller names none. An HSM signs in milliseconds. */
export const signTimeoutMsDefault = 10_000;

/** secp256k1's group order, and half of it: EIP-2 accepts only `s` at or below the half. */
const curveOrder = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const halfCurveOrder = curveOrder / 2n;

/**
 * Refuses, before any key is used, a payload that no longer hashes to its approval or a transfer
 * that is not the one the payload names (C02). Programmer errors and tampering look alike here;
 * both are PAYLOAD_MISMATCH and a person looks at the withdrawal.
 */
export function assertApproved(approval: Approval, transfer: ApprovedTransfer | null): void {
  if (payloadHash(approval.payload) !== approval.payloadHash) {
    throw new IdemError('PAYLOAD_MISMATCH', 'the stored payload does not match its approved hash; refusing');
  }
  if (transfer === null) return;
  const destination = approval.payload.destination;
  if (destination === null || destination.toLowerCase() !== transfer.to.toLowerCase()) {
    throw new IdemError('PAYLOAD_MISMATCH', 'the transaction pays another destination than the approval');
  }
  if (approval.payload.amountMinor !== transfer.amountMinor.toString()) {
    throw new IdemError('PAYLOAD_MISMATCH', 'the transaction moves another amount than the approval');
  }
}

/**
 * Turns a raw (r, s) from a key holder into an Ethereum signature: `s` normalised to the low
 * half (EIP-2; flipping s flips the recovery bit, which is recomputed anyway), and the recovery
 * bit found by recovering against the holder's address. Anything that recovers to neither is a
 * wrong key or a broken token: refused.
 */
export async function ethereumSignature(
  digest: Hex,
  raw: { r: bigint; s: bigint },
  address: Address,
): Promise<DigestSignature> {
  if (raw.r <= 0n || raw.r >= curveOrder || raw.s <= 0n || raw.s >= curveOrder) {
    throw new IdemError('SIGNER_UNAVAILABLE', 'the signer returned a signature outside the curve order');
  }
  const s = raw.s > halfCurveOrder ? curveOrder - raw.s : raw.s;
  const r = `0x${raw.r.toString(16).padStart(64, '0')}` as Hex;
  const sHex = `0x${s.toString(16).padStart(64, '0')}` as Hex;
  for (const yParity of [0, 1] as const) {
    const recovered = await recoverAddress({ hash: digest, signature: { r, s: sHex, yParity } });
    if (getAddress(recovered) === getAddress(address)) return { r, s: sHex, yParity };
  }
  throw new IdemError('SIGNER_UNAVAILABLE', 'the signature does not recover to the hot wallet address');
}

/** Runs one signer call under a deadline; a late answer is dropped, never used (see the header). */
export async function withinDeadline<T>(call: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new IdemError('SIGNER_UNAVAILABLE', `${what}: no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([call, deadline]);
  } catch (error) {
    if (error instanceof IdemError) throw error;
    throw new IdemError('SIGNER_UNAVAILABLE', `${what}: ${String(error).slice(0, 200)}`);
  } finally {
    clearTimeout(timer);
    // A call that settles after the deadline must not become an unhandled rejection.
    call.catch(() => undefined);
  }
}

/** Signs an EIP-1559 transaction through the signer; the recovered sender is checked once more. */
export async function signTransaction(
  signer: DigestSigner,
  transaction: TransactionSerializableEIP1559,
  timeoutMs: number,
  context?: SigningContext,
): Promise<Hex> {
  const unsigned = serializeTransaction(transaction);
  const digest = keccak256(unsigned);
  let call: Promise<DigestSignature>;
  if (signer.signTransaction) {
    if (!context)
      throw new IdemError('VALIDATION', 'the signer service needs the operation a transaction is for');
    call = signer.signTransaction(unsigned, context);
  } else {
    call = signer.signDigest(digest);
  }
  const signature = await withinDeadline(call, timeoutMs, `signer ${signer.location}`);
  // A key holder we do not run (a KMS, an MPC provider) could answer for another key: check.
  const recovered = await recoverAddress({ hash: digest, signature });
  if (getAddress(recovered) !== getAddress(signer.address)) {
    throw new IdemError('SIGNER_UNAVAILABLE', 'the signature does not recover to the hot wallet address');
  }
  return serializeTransaction(transaction, signature);
}
