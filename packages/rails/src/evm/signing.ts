import { IdemError } from '@idem/contracts';
import {
  type Address,
  decodeFunctionData,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  keccak256,
  parseTransaction,
  recoverTransactionAddress,
  type TransactionSerializableEIP1559,
} from 'viem';
import { localKeySigner } from '../signer/local-key.ts';
import {
  type Approval,
  type ApprovedTransfer,
  assertApproved,
  type DigestSigner,
  type SigningKind,
  signTransaction,
} from '../signer/signer.ts';
import { type EvmSignRequestInput, evmSignRequestSchema, type SignedEvmTransaction } from './types.ts';

/**
 * Signing for the EVM rail, offline: a payment, a fee bump of one of our transactions, or a cancel
 * of it. Every path checks the approval (C02) and the rail's caps before the signer is called.
 */

/** The fees of a replacement or cancel, in wei per gas. */
export interface ReplacementFees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/** Who signs, for which chain, within which deadline and caps. */
export interface EvmSigning {
  signer: DigestSigner;
  chainId: number;
  signTimeoutMs: number;
  gasLimitMax: bigint;
  maxFeePerGasMax: bigint;
}

export const nativeTransferGas = 21_000n;

export function signerOf(config: { signer?: DigestSigner; privateKey?: Hex }): DigestSigner {
  if (config.signer && !config.privateKey) return config.signer;
  if (config.privateKey && !config.signer) return localKeySigner(config.privateKey, 'in-process key');
  throw new IdemError('VALIDATION', 'an EVM rail needs exactly one of signer and privateKey');
}

function signWith(
  signing: EvmSigning,
  transaction: Omit<TransactionSerializableEIP1559, 'type' | 'chainId'>,
  approval: Approval,
  kind: SigningKind,
): Promise<Hex> {
  const context =
    approval.operationId === undefined
      ? undefined
      : { tenantId: approval.payload.tenantId, operationId: approval.operationId, kind };
  return signTransaction(
    signing.signer,
    { ...transaction, type: 'eip1559', chainId: signing.chainId },
    signing.signTimeoutMs,
    context,
  );
}

function signed(signing: EvmSigning, rawTransaction: Hex, nonce: number): SignedEvmTransaction {
  return {
    rawTransaction,
    txHash: keccak256(rawTransaction),
    sender: signing.signer.address,
    nonce,
    chainId: signing.chainId,
  };
}

export async function signPayment(
  signing: EvmSigning,
  input: EvmSignRequestInput,
  approval: Approval,
): Promise<SignedEvmTransaction> {
  const { gasLimitMax, maxFeePerGasMax } = signing;
  const parsed = evmSignRequestSchema.safeParse(input);
  if (!parsed.success) {
    throw new IdemError('VALIDATION', 'invalid EVM sign request', {
      issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
    });
  }
  const request = parsed.data;
  const refuse = (path: string, message: string): never => {
    throw new IdemError('VALIDATION', message, { issues: [{ path, message }] });
  };
  if (request.gasLimit > gasLimitMax)
    refuse('gasLimit', `gasLimit is above the rail's cap of ${gasLimitMax}`);
  if (request.gasLimit < nativeTransferGas)
    refuse('gasLimit', 'gasLimit is below the 21,000 any transfer needs');
  if (request.maxFeePerGas > maxFeePerGasMax) {
    refuse('maxFeePerGas', `maxFeePerGas is above the rail's cap of ${maxFeePerGasMax} wei`);
  }
  if (request.maxPriorityFeePerGas > request.maxFeePerGas) {
    refuse('maxPriorityFeePerGas', 'maxPriorityFeePerGas must not exceed maxFeePerGas');
  }

  const { transfer } = request;
  assertApproved(approval, transfer);
  const call =
    transfer.asset === 'native'
      ? { to: transfer.to, value: transfer.amountMinor, data: undefined }
      : {
          to: transfer.token,
          value: 0n,
          data: encodeFunctionData({
            abi: erc20Abi,
            functionName: 'transfer',
            args: [transfer.to, transfer.amountMinor],
          }),
        };
  const rawTransaction = await signWith(
    signing,
    {
      nonce: request.nonce,
      gas: request.gasLimit,
      maxFeePerGas: request.maxFeePerGas,
      maxPriorityFeePerGas: request.maxPriorityFeePerGas,
      ...call,
    },
    approval,
    'payment',
  );
  return signed(signing, rawTransaction, request.nonce);
}

export async function signReplacement(
  signing: EvmSigning,
  previous: Hex,
  fees: ReplacementFees,
  approval: Approval,
): Promise<SignedEvmTransaction> {
  const tx = await replaceable(signing, previous, fees);
  // A bump re-signs the same payment: it must still be the approved one (C02).
  assertApproved(approval, transferOf(tx));
  const raw = await signWith(
    signing,
    {
      nonce: tx.nonce,
      gas: tx.gas,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      ...(tx.to ? { to: tx.to } : {}),
      value: tx.value ?? 0n,
      ...(tx.data ? { data: tx.data } : {}),
    },
    approval,
    'replacement',
  );
  return signed(signing, raw, tx.nonce);
}

export async function signCancel(
  signing: EvmSigning,
  previous: Hex,
  fees: ReplacementFees,
  approval: Approval,
): Promise<SignedEvmTransaction> {
  const tx = await replaceable(signing, previous, fees);
  // A cancel pays nobody, but it is still signed only for an intact approval.
  assertApproved(approval, null);
  const raw = await signWith(
    signing,
    {
      nonce: tx.nonce,
      gas: nativeTransferGas,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      to: signing.signer.address,
      value: 0n,
    },
    approval,
    'cancel',
  );
  return signed(signing, raw, tx.nonce);
}

/** Reads one of our signed transactions back and checks the new fees outbid it. */
async function replaceable(signing: EvmSigning, previous: Hex, fees: ReplacementFees) {
  const { maxFeePerGasMax } = signing;
  const parsed = parseTransaction(previous);
  if (parsed.type !== 'eip1559' || parsed.nonce === undefined || parsed.gas === undefined) {
    throw new IdemError('VALIDATION', 'only an EIP-1559 transaction of ours can be replaced');
  }
  const sender = await recoverTransactionAddress({ serializedTransaction: previous as never });
  if (sender.toLowerCase() !== signing.signer.address.toLowerCase() || parsed.chainId !== signing.chainId) {
    throw new IdemError('VALIDATION', 'the transaction to replace was not signed by this hot wallet');
  }
  const previousMax = parsed.maxFeePerGas ?? 0n;
  const previousTip = parsed.maxPriorityFeePerGas ?? 0n;
  if (fees.maxFeePerGas <= previousMax || fees.maxPriorityFeePerGas <= previousTip) {
    throw new IdemError('VALIDATION', 'a replacement must raise both maxFeePerGas and maxPriorityFeePerGas');
  }
  if (fees.maxFeePerGas > maxFeePerGasMax) {
    throw new IdemError('VALIDATION', `maxFeePerGas is above the rail's cap of ${maxFeePerGasMax} wei`);
  }
  if (fees.maxPriorityFeePerGas > fees.maxFeePerGas) {
    throw new IdemError('VALIDATION', 'maxPriorityFeePerGas must not exceed maxFeePerGas');
  }
  return { ...parsed, nonce: parsed.nonce, gas: parsed.gas };
}

/** The payment a signed transaction of ours makes: native value, or an ERC-20 transfer's arguments. */
function transferOf(tx: { to?: Address | null; value?: bigint; data?: Hex }): ApprovedTransfer {
  const notAPayment = () =>
    new IdemError('PAYLOAD_MISMATCH', 'the transaction to replace is not an approved payment');
  if (!tx.to) throw notAPayment();
  if (!tx.data || tx.data === '0x') return { to: tx.to, amountMinor: tx.value ?? 0n };
  try {
    const call = decodeFunctionData({ abi: erc20Abi, data: tx.data });
    if (call.functionName !== 'transfer') throw notAPayment();
    const [to, amountMinor] = call.args;
    return { to, amountMinor };
  } catch {
    throw notAPayment();
  }
}
