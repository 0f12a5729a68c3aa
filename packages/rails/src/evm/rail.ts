import { IdemError } from '@idem/contracts';
import {
  type Address,
  createPublicClient,
  decodeFunctionData,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  http,
  isHex,
  keccak256,
  type PublicClient,
  parseEventLogs,
  parseTransaction,
  recoverTransactionAddress,
  TransactionNotFoundError,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
  type TransactionSerializableEIP1559,
} from 'viem';
import { localKeySigner } from '../signer/local-key.ts';
import {
  type Approval,
  type ApprovedTransfer,
  assertApproved,
  type DigestSigner,
  signTimeoutMsDefault,
  signTransaction,
} from '../signer/signer.ts';
import { readBroadcastError } from './classify.ts';
import { type DepositScanRequest, scanDeposits } from './deposits.ts';
import {
  type BroadcastOutcome,
  type EvmDeposit,
  type EvmLookupEvidence,
  type EvmLookupRequest,
  type EvmSettlementEvidence,
  type EvmSettlementRequest,
  type EvmSignRequestInput,
  evmSignRequestSchema,
  type SignedEvmTransaction,
} from './types.ts';

export interface EvmRailLimits {
  /** Refuse to sign above this gas limit. Default 300,000 (an ERC-20 transfer needs about 52,000). */
  gasLimitMax?: bigint;
  /** Refuse to sign above this fee cap per gas, in wei. Default 1,000 gwei. */
  maxFeePerGasMax?: bigint;
  /** The widest block range one deposit scan may cover. Default 1,000. */
  scanBlocksMax?: number;
}

/** The fees of a replacement or cancel, in wei per gas. */
export interface ReplacementFees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

export interface EvmRailConfig {
  rpcUrl: string;
  /** The chain the key signs for (EIP-155 replay protection). Checked against the node on `verifyChain`. */
  chainId: number;
  /**
   * Who holds the hot wallet's key (packages/rails/src/signer): a PKCS#11 token in production.
   * `privateKey` is the in-process development key; exactly one of the two.
   */
  signer?: DigestSigner;
  privateKey?: Hex;
  /** Deadline of each signer call. Default 10,000 ms. */
  signTimeoutMs?: number;
  /** Deadline of each JSON-RPC call. Default 5,000 ms. */
  requestTimeoutMs?: number;
  limits?: EvmRailLimits;
}

export interface EvmRail {
  /** The hot wallet's address (the sender of everything this rail signs). */
  readonly address: Address;
  readonly chainId: number;
  /** Throws unless the node reports the configured chain id. */
  verifyChain(): Promise<void>;
  /**
   * Signs offline; touches no network. The approval's hash is recomputed and the transfer compared
   * with it before the signer is called (C02). A local key gives the same bytes for the same
   * request; an HSM's signature differs each time, so only the persisted one may ever be sent.
   */
  sign(request: EvmSignRequestInput, approval: Approval): Promise<SignedEvmTransaction>;
  /**
   * Signs a fee bump of one of our stored transactions (issue 12): the same nonce, recipient,
   * value, data and gas limit, higher fees. Offline; refuses bytes this key did not sign and fees
   * that are not higher on both fields.
   */
  signReplacement(previous: Hex, fees: ReplacementFees, approval: Approval): Promise<SignedEvmTransaction>;
  /**
   * Signs a cancel of one of our stored transactions: the same nonce, a zero-value transfer to the
   * hot wallet itself (21,000 gas), higher fees. If it is mined, the payment can never be.
   */
  signCancel(previous: Hex, fees: ReplacementFees, approval: Approval): Promise<SignedEvmTransaction>;
  /** Sends stored bytes once and classifies the answer; never retries by itself. */
  broadcast(rawTransaction: Hex, options?: { timeoutMs?: number }): Promise<BroadcastOutcome>;
  /** Gathers chain evidence for reconciliation. Throws when the node cannot be asked (no evidence). */
  lookup(request: EvmLookupRequest): Promise<EvmLookupEvidence>;
  /**
   * Proves a stuck withdrawal paid or never able to pay, at the asset's depth (manual resolution).
   * Anything short of proof is `unproven`; throws when the node cannot be asked (no evidence).
   */
  settlement(request: EvmSettlementRequest): Promise<EvmSettlementEvidence>;
  /** The chain's view of a sender's nonces: `latest` counts mined transactions, `pending` adds the pool. */
  readNonces(address?: Address): Promise<{ latest: number; pending: number }>;
  /** The node's fee suggestion, for a caller that then caps it. */
  suggestFees(): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }>;
  scanDeposits(request: DepositScanRequest): Promise<EvmDeposit[]>;
}

const requestTimeoutMsDefault = 5_000;
const gasLimitMaxDefault = 300_000n;
/** Whether `txHash` is one of `ours` (every hash we signed for a nonce: the original, bumps, cancels). */
function isOneOf(txHash: Hex, ours: readonly Hex[]): boolean {
  return ours.some((hash) => hash.toLowerCase() === txHash.toLowerCase());
}

const maxFeePerGasMaxDefault = 1_000_000_000_000n;
const scanBlocksMaxDefault = 1_000;
const nativeTransferGas = 21_000n;
/** The largest raw transaction we will send: far above any transfer, far below a node's 128 KiB limit. */
const rawTransactionBytesMax = 16 * 1024;
/** Response bodies are tiny JSON; a larger one is a misbehaving node, not data to parse. */
const responseBodyBytesMax = 4 * 1024 * 1024;

function signerOf(config: EvmRailConfig): DigestSigner {
  if (config.signer && !config.privateKey) return config.signer;
  if (config.privateKey && !config.signer) return localKeySigner(config.privateKey, 'in-process key');
  throw new IdemError('VALIDATION', 'an EVM rail needs exactly one of signer and privateKey');
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

export function createEvmRail(config: EvmRailConfig): EvmRail {
  const signer = signerOf(config);
  const account = { address: signer.address };
  const signTimeoutMs = config.signTimeoutMs ?? signTimeoutMsDefault;
  const signWith = (transaction: Omit<TransactionSerializableEIP1559, 'type' | 'chainId'>) =>
    signTransaction(signer, { ...transaction, type: 'eip1559', chainId: config.chainId }, signTimeoutMs);
  const requestTimeoutMs = config.requestTimeoutMs ?? requestTimeoutMsDefault;
  const gasLimitMax = config.limits?.gasLimitMax ?? gasLimitMaxDefault;
  const maxFeePerGasMax = config.limits?.maxFeePerGasMax ?? maxFeePerGasMaxDefault;
  const scanBlocksMax = config.limits?.scanBlocksMax ?? scanBlocksMaxDefault;

  const makeClient = (timeoutMs: number): PublicClient =>
    createPublicClient({
      // Retries belong to the caller's state machine, never hidden inside a transport.
      transport: http(config.rpcUrl, {
        timeout: timeoutMs,
        retryCount: 0,
        maxResponseBodySize: responseBodyBytesMax,
      }),
      // viem caches the block number for a polling interval by default; evidence must be current.
      cacheTime: 0,
    });
  const client = makeClient(requestTimeoutMs);

  async function sign(input: EvmSignRequestInput, approval: Approval): Promise<SignedEvmTransaction> {
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
    const rawTransaction = await signWith({
      nonce: request.nonce,
      gas: request.gasLimit,
      maxFeePerGas: request.maxFeePerGas,
      maxPriorityFeePerGas: request.maxPriorityFeePerGas,
      ...call,
    });
    return {
      rawTransaction,
      txHash: keccak256(rawTransaction),
      sender: account.address,
      nonce: request.nonce,
      chainId: config.chainId,
    };
  }

  /** Reads one of our signed transactions back and checks the new fees outbid it. */
  async function replaceable(previous: Hex, fees: ReplacementFees) {
    const parsed = parseTransaction(previous);
    if (parsed.type !== 'eip1559' || parsed.nonce === undefined || parsed.gas === undefined) {
      throw new IdemError('VALIDATION', 'only an EIP-1559 transaction of ours can be replaced');
    }
    const sender = await recoverTransactionAddress({ serializedTransaction: previous as never });
    if (sender.toLowerCase() !== account.address.toLowerCase() || parsed.chainId !== config.chainId) {
      throw new IdemError('VALIDATION', 'the transaction to replace was not signed by this hot wallet');
    }
    const previousMax = parsed.maxFeePerGas ?? 0n;
    const previousTip = parsed.maxPriorityFeePerGas ?? 0n;
    if (fees.maxFeePerGas <= previousMax || fees.maxPriorityFeePerGas <= previousTip) {
      throw new IdemError(
        'VALIDATION',
        'a replacement must raise both maxFeePerGas and maxPriorityFeePerGas',
      );
    }
    if (fees.maxFeePerGas > maxFeePerGasMax) {
      throw new IdemError('VALIDATION', `maxFeePerGas is above the rail's cap of ${maxFeePerGasMax} wei`);
    }
    if (fees.maxPriorityFeePerGas > fees.maxFeePerGas) {
      throw new IdemError('VALIDATION', 'maxPriorityFeePerGas must not exceed maxFeePerGas');
    }
    return { ...parsed, nonce: parsed.nonce, gas: parsed.gas };
  }

  async function signed(rawTransaction: Hex, nonce: number): Promise<SignedEvmTransaction> {
    return {
      rawTransaction,
      txHash: keccak256(rawTransaction),
      sender: account.address,
      nonce,
      chainId: config.chainId,
    };
  }

  async function signReplacement(
    previous: Hex,
    fees: ReplacementFees,
    approval: Approval,
  ): Promise<SignedEvmTransaction> {
    const tx = await replaceable(previous, fees);
    // A bump re-signs the same payment: it must still be the approved one (C02).
    assertApproved(approval, transferOf(tx));
    const raw = await signWith({
      nonce: tx.nonce,
      gas: tx.gas,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      ...(tx.to ? { to: tx.to } : {}),
      value: tx.value ?? 0n,
      ...(tx.data ? { data: tx.data } : {}),
    });
    return signed(raw, tx.nonce);
  }

  async function signCancel(
    previous: Hex,
    fees: ReplacementFees,
    approval: Approval,
  ): Promise<SignedEvmTransaction> {
    const tx = await replaceable(previous, fees);
    // A cancel pays nobody, but it is still signed only for an intact approval.
    assertApproved(approval, null);
    const raw = await signWith({
      nonce: tx.nonce,
      gas: nativeTransferGas,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      to: account.address,
      value: 0n,
    });
    return signed(raw, tx.nonce);
  }

  async function broadcast(
    rawTransaction: Hex,
    options: { timeoutMs?: number } = {},
  ): Promise<BroadcastOutcome> {
    if (!isHex(rawTransaction, { strict: true }) || rawTransaction.length > 2 + rawTransactionBytesMax * 2) {
      // Programmer error: these bytes never came from `sign`.
      throw new IdemError('VALIDATION', 'rawTransaction must be 0x-prefixed hex of at most 16 KiB');
    }
    const txHash = keccak256(rawTransaction);
    const sender = options.timeoutMs === undefined ? client : makeClient(options.timeoutMs);
    let returned: Hex;
    try {
      returned = await sender.sendRawTransaction({ serializedTransaction: rawTransaction });
    } catch (error) {
      const reading = readBroadcastError(error);
      switch (reading.kind) {
        case 'already_known':
          return { outcome: 'accepted', txHash, alreadyKnown: true };
        case 'nonce_too_low':
          return classifyNonceTooLow(txHash, reading.detail);
        case 'rejected':
          return { outcome: 'rejected', txHash, reason: reading.reason, detail: reading.detail };
        case 'ambiguous':
          return { outcome: 'ambiguous', txHash, reason: reading.reason, detail: reading.detail };
      }
    }
    if (returned.toLowerCase() !== txHash.toLowerCase()) {
      // The node names a different transaction than the bytes we sent: we cannot say what it took.
      return { outcome: 'ambiguous', txHash, reason: 'hash_mismatch', detail: `node returned ${returned}` };
    }
    return { outcome: 'accepted', txHash, alreadyKnown: false };
  }

  /**
   * "nonce too low" answers a rebroadcast of our own mined transaction as well as a transaction
   * whose nonce another one took. Only the chain can tell which: our hash mined means accepted.
   */
  async function classifyNonceTooLow(txHash: Hex, detail: string): Promise<BroadcastOutcome> {
    try {
      const transaction = await getTransactionOrNull(txHash);
      if (transaction) return { outcome: 'accepted', txHash, alreadyKnown: true };
      return { outcome: 'rejected', txHash, reason: 'nonce_too_low', detail };
    } catch (error) {
      return {
        outcome: 'ambiguous',
        txHash,
        reason: 'unrecognised_error',
        detail: `nonce too low, and the follow-up lookup failed: ${String(error).slice(0, 200)}`,
      };
    }
  }

  async function getTransactionOrNull(txHash: Hex) {
    try {
      return await client.getTransaction({ hash: txHash });
    } catch (error) {
      if (error instanceof TransactionNotFoundError) return null;
      throw error;
    }
  }

  async function getReceiptOrNull(txHash: Hex) {
    try {
      return await client.getTransactionReceipt({ hash: txHash });
    } catch (error) {
      if (error instanceof TransactionReceiptNotFoundError) return null;
      throw error;
    }
  }

  /** A receipt counts only if its block is still the canonical block at that height (reorgs, C17). */
  async function canonicalReceipt(txHash: Hex) {
    const receipt = await getReceiptOrNull(txHash);
    if (!receipt) return null;
    const block = await client.getBlock({ blockNumber: receipt.blockNumber }).catch((error: unknown) => {
      if (error instanceof Error && error.name === 'BlockNotFoundError') return null;
      throw error;
    });
    return block && block.hash === receipt.blockHash ? receipt : null;
  }

  async function minedEvidence(receipt: TransactionReceipt): Promise<EvmLookupEvidence> {
    const head = await client.getBlockNumber({ cacheTime: 0 });
    return {
      found: 'mined',
      blockNumber: receipt.blockNumber,
      blockHash: receipt.blockHash,
      confirmations: Number(head - receipt.blockNumber + 1n),
      status: receipt.status,
      headBlockNumber: head,
    };
  }

  async function lookup(request: EvmLookupRequest): Promise<EvmLookupEvidence> {
    const receipt = await canonicalReceipt(request.txHash);
    if (receipt) return minedEvidence(receipt);
    const transaction = await getTransactionOrNull(request.txHash);
    if (transaction && transaction.blockNumber === null) {
      return { found: 'pending', headBlockNumber: await client.getBlockNumber({ cacheTime: 0 }) };
    }
    // Pin the nonce read to one block, then look for our receipt again: if our transaction were in
    // any block up to that one, the receipt would exist now, so a passed nonce is someone else's.
    const head = await client.getBlockNumber({ cacheTime: 0 });
    const minedNonce = await client.getTransactionCount({ address: request.sender, blockNumber: head });
    const receiptAfter = await canonicalReceipt(request.txHash);
    if (receiptAfter) return minedEvidence(receiptAfter);
    return { found: 'absent', nonceConsumed: minedNonce > request.nonce, minedNonce, headBlockNumber: head };
  }

  async function settlement(request: EvmSettlementRequest): Promise<EvmSettlementEvidence> {
    const head = await client.getBlockNumber({ cacheTime: 0 });
    const pinned = head - BigInt(Math.max(request.depth, 1)) + 1n;
    const base = { headBlockNumber: head, pinnedBlockNumber: pinned };
    if (pinned < 0n) {
      return {
        verdict: 'unproven',
        reason: 'chain_shorter_than_depth',
        txHash: null,
        ...base,
        minedNonceAtPin: null,
        blockNumber: null,
        claimCheck: null,
        consumer: null,
      };
    }
    const ours = request.ours;
    const minedNonceAtPin = ours
      ? await client.getTransactionCount({ address: request.sender, blockNumber: pinned })
      : null;
    // Which transaction took our nonce, found in the block where the sender's count passed it, by
    // reads at explicit blocks at or below the pinned one. A lagging node cannot fake this answer
    // (it refuses blocks it lacks), where a receipt it has not seen yet would look "absent".
    const consumer =
      ours && minedNonceAtPin !== null && minedNonceAtPin > ours.nonce
        ? await nonceConsumer(request.sender, ours.nonce, pinned, minedNonceAtPin)
        : null;
    const consumerIsOurs =
      consumer !== null && ours !== null && isOneOf(consumer.txHash, [ours.txHash, ...(ours.attempts ?? [])]);
    const ourReceipt = ours ? await canonicalReceipt(ours.txHash) : null;
    const ourDeep = ourReceipt !== null && ourReceipt.blockNumber <= pinned;
    const answer = (
      verdict: EvmSettlementEvidence['verdict'],
      reason: string,
      txHash: Hex | null,
      blockNumber: bigint | null,
    ): EvmSettlementEvidence => ({
      verdict,
      reason,
      txHash,
      ...base,
      minedNonceAtPin,
      blockNumber,
      claimCheck: null,
      consumer,
    });

    // Can our stored bytes still be mined? Not if nothing was signed, if they were mined, or if
    // their nonce was consumed at depth by a transaction that is not ours.
    const oursSpent = ours === null || ourDeep || (consumer !== null && !consumerIsOurs);

    /** Proven not sent, or why not. */
    const notSent = (): EvmSettlementEvidence | string => {
      if (!ours) return answer('not_sent', 'never_signed', null, null);
      if (ourReceipt) {
        if (ourReceipt.status === 'success') return 'our_transaction_mined';
        return ourDeep
          ? answer('not_sent', 'reverted_at_depth', ours.txHash, ourReceipt.blockNumber)
          : 'reverted_not_deep_enough';
      }
      if (!consumer) return 'nonce_not_consumed_at_depth';
      // Ours took it, though its receipt is not (yet) visible here: it was sent.
      if (consumerIsOurs) return 'nonce_consumed_by_ours';
      return answer('not_sent', 'nonce_consumed_by_other', null, null);
    };
    const paid = async (): Promise<EvmSettlementEvidence> => {
      const claimed = request.claimedTxHash ?? ours?.txHash ?? null;
      if (!claimed) return answer('unproven', 'no_transaction_named', null, null);
      const isOurs = ours !== null && claimed.toLowerCase() === ours.txHash.toLowerCase();
      const receipt = isOurs ? ourReceipt : await canonicalReceipt(claimed);
      if (!receipt) return answer('unproven', 'not_mined', claimed, null);
      if (receipt.status !== 'success') return answer('unproven', 'reverted', claimed, receipt.blockNumber);
      if (receipt.blockNumber > pinned)
        return answer('unproven', 'not_deep_enough', claimed, receipt.blockNumber);
      const terms = await termsMismatch(claimed, receipt, request);
      if (terms) return answer('unproven', terms, claimed, receipt.blockNumber);
      // Someone else's payment settles the hold only if our own bytes can no longer pay again.
      if (!isOurs && !oursSpent) {
        return answer('unproven', 'our_transaction_still_mineable', claimed, receipt.blockNumber);
      }
      return answer(
        'paid',
        isOurs ? 'our_transaction_mined' : 'named_transaction_mined',
        claimed,
        receipt.blockNumber,
      );
    };

    if (request.intent === 'not_sent') {
      const proven = notSent();
      if (typeof proven !== 'string') return proven;
      const other = await paid();
      return other.verdict === 'paid' ? other : answer('unproven', proven, ours?.txHash ?? null, null);
    }
    const proven = await paid();
    if (proven.verdict === 'paid') return proven;
    // Not paid as claimed, but proven never able to pay: say so, and why the claim failed.
    const other = notSent();
    return typeof other === 'string' ? proven : { ...other, claimCheck: proven.reason };
  }

  /**
   * The transaction of `sender` with `nonce`, mined at or below `pinned` (where the sender's count
   * is `countAtPin` > nonce): the first block whose count passes the nonce holds it. Every read
   * names its block. Throws when the node cannot answer or contradicts itself.
   */
  async function nonceConsumer(
    sender: Address,
    nonce: number,
    pinned: bigint,
    countAtPin: number,
  ): Promise<{ txHash: Hex; blockNumber: bigint; blockHash: Hex }> {
    if (countAtPin <= nonce) throw new Error('nonce not consumed at the pinned block');
    let below = -1n;
    let at = pinned;
    while (at - below > 1n) {
      const middle = below + (at - below) / 2n;
      const count = await client.getTransactionCount({ address: sender, blockNumber: middle });
      if (count > nonce) at = middle;
      else below = middle;
    }
    const block = await client.getBlock({ blockNumber: at, includeTransactions: true });
    const taken = block.transactions.find(
      (t) => t.from.toLowerCase() === sender.toLowerCase() && t.nonce === nonce,
    );
    if (!taken || !block.hash) {
      throw new IdemError(
        'INTERNAL',
        `the node shows nonce ${nonce} consumed in block ${at} without its transaction`,
      );
    }
    return { txHash: taken.hash, blockNumber: at, blockHash: block.hash };
  }

  /** Null when the mined transaction moved exactly the terms from the sender; else what differs. */
  async function termsMismatch(
    txHash: Hex,
    receipt: TransactionReceipt,
    request: EvmSettlementRequest,
  ): Promise<string | null> {
    const transaction = await client.getTransaction({ hash: txHash });
    const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase();
    if (!same(transaction.from, request.sender)) return 'sender_differs';
    const terms = request.terms;
    if (terms.asset === 'native') {
      if (!same(transaction.to, terms.to)) return 'destination_differs';
      if (transaction.value !== terms.amountMinor) return 'amount_differs';
      return null;
    }
    if (!same(transaction.to, terms.token)) return 'token_differs';
    const transfers = parseEventLogs({ abi: erc20Abi, eventName: 'Transfer', logs: receipt.logs }).filter(
      (log) => same(log.address, terms.token) && same(log.args.from, request.sender),
    );
    if (transfers.length !== 1 || !transfers[0]) return 'token_transfer_not_found';
    if (!same(transfers[0].args.to, terms.to)) return 'destination_differs';
    if (transfers[0].args.value !== terms.amountMinor) return 'amount_differs';
    return null;
  }

  return {
    address: account.address,
    chainId: config.chainId,
    async verifyChain() {
      const reported = await client.getChainId();
      if (reported !== config.chainId) {
        throw new IdemError(
          'INTERNAL',
          `node reports chain id ${reported}, rail is configured for ${config.chainId}`,
        );
      }
    },
    sign,
    signReplacement,
    signCancel,
    broadcast,
    lookup,
    settlement,
    async readNonces(address = account.address) {
      const [latest, pending] = await Promise.all([
        client.getTransactionCount({ address, blockTag: 'latest' }),
        client.getTransactionCount({ address, blockTag: 'pending' }),
      ]);
      return { latest, pending };
    },
    async suggestFees() {
      const fees = await client.estimateFeesPerGas();
      return { maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
    },
    scanDeposits: (request) => scanDeposits(client, request, scanBlocksMax),
  };
}
