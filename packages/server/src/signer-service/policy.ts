/**
 * What the signer service signs (docs/SIGNING.md): only a transaction that the operation's
 * approval, as the service reads it from the database itself, covers. Pure: the caller reads the
 * facts and the log's (wallet, nonce) index; this decides.
 */
import { IdemError } from '@idem/contracts';
import { assertPayloadIntact, type HotWallet, type Operation } from '@idem/core';
import type { SigningKind } from '@idem/rails';
import { encodeFunctionData, erc20Abi, type Hex, type TransactionSerializableEIP1559 } from 'viem';

/** What the service read about the operation, in one read-only transaction. */
export interface SigningFacts {
  operation: Operation;
  wallet: HotWallet;
  /** The asset's token contract; null for the network's native coin. */
  tokenContract: string | null;
  /** The fee cap in force (a total in wei), raised only by an executed raise_fee_cap proposal. */
  feeCapWei: bigint | null;
  /** The freezes in force over the operation: its tenant's, its asset's or its account's. */
  freezes: { freezeId: string; scope: string }[];
}

/**
 * A refusal of the signer's own, outside the API's error codes: no caller of the API ever meets it,
 * the worker sees it as a refusal (nothing signed) and the log keeps it under this stable code.
 */
export class SigningFrozen extends Error {
  readonly code = 'FROZEN' as const;
  /** 423 Locked: the request may be sound, and is asked again once the freeze is lifted. */
  static readonly status = 423;
}

export interface SigningLimits {
  chainId: number;
  gasLimitMax: bigint;
  maxFeePerGasMax: bigint;
}

/** What the service's own log says was signed: operation ids by (wallet, nonce), nonces by operation. */
export interface SignedIndex {
  operationsAt(wallet: string, nonce: number): Set<string>;
  noncesOf(operationId: string): Set<number>;
}

const NATIVE_ASSETS: Record<string, string> = { ethereum: 'ETH' };
const NATIVE_TRANSFER_GAS = 21_000n;

type Unsigned = TransactionSerializableEIP1559 & { nonce: number; gas: bigint; maxFeePerGas: bigint };

function refuse(
  code: 'VALIDATION' | 'PAYLOAD_MISMATCH' | 'INVALID_TRANSITION' | 'IDEMPOTENCY_CONFLICT' | 'STALE_WRITE',
  message: string,
): never {
  throw new IdemError(code, message);
}

/** The (to, value, data) a payment of this approval makes: native value, or an ERC-20 transfer. */
function approvedCall(facts: SigningFacts): { to: string; value: bigint; data: Hex } {
  const op = facts.operation;
  if (!op.destination) refuse('PAYLOAD_MISMATCH', 'the approved payload names no destination');
  const amount = BigInt(op.amountMinor);
  if (facts.tokenContract) {
    const data = encodeFunctionData({
      abi: erc20Abi,
      functionName: 'transfer',
      args: [op.destination as Hex, amount],
    });
    return { to: facts.tokenContract, value: 0n, data };
  }
  if (NATIVE_ASSETS[op.network] !== op.assetCode) {
    refuse('VALIDATION', `asset ${op.assetCode} has no token contract configured`);
  }
  return { to: op.destination, value: amount, data: '0x' };
}

function sameCall(tx: Unsigned, call: { to: string; value: bigint; data: Hex }): void {
  if ((tx.to ?? '').toLowerCase() !== call.to.toLowerCase()) {
    refuse('PAYLOAD_MISMATCH', 'the transaction pays another address (or token) than the approval');
  }
  if ((tx.value ?? 0n) !== call.value) {
    refuse('PAYLOAD_MISMATCH', 'the transaction moves another amount than the approval');
  }
  if ((tx.data ?? '0x').toLowerCase() !== call.data.toLowerCase()) {
    refuse('PAYLOAD_MISMATCH', 'the transaction carries other call data than the approved transfer');
  }
}

function withinFeeLimits(tx: Unsigned, facts: SigningFacts, limits: SigningLimits): void {
  if (tx.gas < NATIVE_TRANSFER_GAS || tx.gas > limits.gasLimitMax) {
    refuse('VALIDATION', `gas limit ${tx.gas} is outside 21000..${limits.gasLimitMax}`);
  }
  if (tx.maxFeePerGas > limits.maxFeePerGasMax) {
    refuse('VALIDATION', `maxFeePerGas is above the network's ceiling of ${limits.maxFeePerGasMax} wei`);
  }
  if ((tx.maxPriorityFeePerGas ?? 0n) > tx.maxFeePerGas) {
    refuse('VALIDATION', 'maxPriorityFeePerGas must not exceed maxFeePerGas');
  }
  if (facts.feeCapWei !== null && tx.gas * tx.maxFeePerGas > facts.feeCapWei) {
    refuse('VALIDATION', `the fee (gas x maxFeePerGas) is above the approved cap of ${facts.feeCapWei} wei`);
  }
}

/** Refuses a signature for a (wallet, nonce) that the log holds for another operation. */
function nonceFree(index: SignedIndex, facts: SigningFacts, nonce: number): void {
  const others = [...index.operationsAt(facts.wallet.address, nonce)].filter(
    (id) => id !== facts.operation.operationId,
  );
  if (others.length > 0) {
    refuse(
      'IDEMPOTENCY_CONFLICT',
      `nonce ${nonce} of ${facts.wallet.address} was already signed for operation ${others[0]}`,
    );
  }
}

/** Throws unless the transaction is one the operation's approval covers now. */
export function checkSigning(
  kind: SigningKind,
  tx: Unsigned,
  facts: SigningFacts,
  limits: SigningLimits,
  index: SignedIndex,
): void {
  const op = facts.operation;
  if (op.kind !== 'withdrawal') refuse('VALIDATION', 'only withdrawals are signed');
  if (!(op.network in NATIVE_ASSETS)) refuse('VALIDATION', `network ${op.network} is not signed here`);
  if (tx.chainId !== limits.chainId) refuse('VALIDATION', `chain id ${tx.chainId} is not ${limits.chainId}`);
  // The stored fields must still hash to the approved hash (C02).
  assertPayloadIntact(op);
  withinFeeLimits(tx, facts, limits);
  if (kind === 'payment') {
    // A freeze in force stops anything new being signed (docs/GOVERNANCE.md "Freeze"): checked
    // here as well as in the claim, so a claim made behind the claim's back signs nothing either.
    // A fee bump or a cancel below is not held: it settles what is already on chain.
    if (facts.freezes.length > 0) {
      const held = facts.freezes.map((f) => `${f.scope} freeze ${f.freezeId}`).join(', ');
      throw new SigningFrozen(`a freeze in force holds this withdrawal: ${held}; nothing new is signed`);
    }
    const first = op.state === 'APPROVED' || (op.state === 'SIGNING' && op.signedArtifact === null);
    if (!first) refuse('INVALID_TRANSITION', `operation is ${op.state}, not APPROVED: no first signature`);
    if (tx.nonce !== facts.wallet.nextNonce) {
      refuse('STALE_WRITE', `nonce ${tx.nonce} is not the wallet's next nonce ${facts.wallet.nextNonce}`);
    }
    nonceFree(index, facts, tx.nonce);
    const signedAt = [...index.noncesOf(op.operationId)].filter((n) => n !== tx.nonce);
    if (signedAt.length > 0) {
      refuse('IDEMPOTENCY_CONFLICT', `operation was already signed with nonce ${signedAt[0]}`);
    }
    sameCall(tx, approvedCall(facts));
    return;
  }
  // A fee bump or a cancel: of an attempt recorded for this same operation, at its nonce.
  if (op.state !== 'BROADCAST' && op.state !== 'UNKNOWN') {
    refuse('INVALID_TRANSITION', `operation is ${op.state}: nothing sent to bump or cancel`);
  }
  if (op.signedArtifact === null || op.chainNonce === null) {
    refuse('INVALID_TRANSITION', 'no signed attempt is recorded for this operation');
  }
  if (tx.nonce !== op.chainNonce) {
    refuse(
      'IDEMPOTENCY_CONFLICT',
      `nonce ${tx.nonce} is not the operation's recorded nonce ${op.chainNonce}`,
    );
  }
  if (kind === 'replacement') {
    sameCall(tx, approvedCall(facts));
    return;
  }
  sameCall(tx, { to: facts.wallet.address, value: 0n, data: '0x' });
  if (tx.gas !== NATIVE_TRANSFER_GAS) refuse('VALIDATION', 'a cancel uses 21000 gas');
}
