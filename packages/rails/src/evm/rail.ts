import { IdemError } from '@idem/contracts';
import { type Address, createPublicClient, type Hex, http, type PublicClient } from 'viem';
import { type Approval, type DigestSigner, signTimeoutMsDefault } from '../signer/signer.ts';
import { broadcast } from './broadcast.ts';
import { lookup } from './chain-reads.ts';
import { type DepositScanRequest, scanDeposits } from './deposits.ts';
import { settlement } from './settlement.ts';
import {
  type EvmSigning,
  type ReplacementFees,
  signCancel,
  signerOf,
  signPayment,
  signReplacement,
} from './signing.ts';
import type {
  BroadcastOutcome,
  EvmDeposit,
  EvmLookupEvidence,
  EvmLookupRequest,
  EvmSettlementEvidence,
  EvmSettlementRequest,
  EvmSignRequestInput,
  SignedEvmTransaction,
} from './types.ts';

export type { ReplacementFees } from './signing.ts';

export interface EvmRailLimits {
  /** Refuse to sign above this gas limit. Default 300,000 (an ERC-20 transfer needs about 52,000). */
  gasLimitMax?: bigint;
  /** Refuse to sign above this fee cap per gas, in wei. Default 1,000 gwei. */
  maxFeePerGasMax?: bigint;
  /** The widest block range one deposit scan may cover. Default 1,000. */
  scanBlocksMax?: number;
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
   * Signs a fee bump of one of our stored transactions: the same nonce, recipient,
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
const maxFeePerGasMaxDefault = 1_000_000_000_000n;
const scanBlocksMaxDefault = 1_000;
/** Response bodies are tiny JSON; a larger one is a misbehaving node, not data to parse. */
const responseBodyBytesMax = 4 * 1024 * 1024;

/**
 * The EVM rail: signing (signing.ts), sending (broadcast.ts), the chain's evidence (chain-reads.ts,
 * settlement.ts) and deposit scans (deposits.ts), over one JSON-RPC client per deadline.
 */
export function createEvmRail(config: EvmRailConfig): EvmRail {
  const signer = signerOf(config);
  const signing: EvmSigning = {
    signer,
    chainId: config.chainId,
    signTimeoutMs: config.signTimeoutMs ?? signTimeoutMsDefault,
    gasLimitMax: config.limits?.gasLimitMax ?? gasLimitMaxDefault,
    maxFeePerGasMax: config.limits?.maxFeePerGasMax ?? maxFeePerGasMaxDefault,
  };
  const requestTimeoutMs = config.requestTimeoutMs ?? requestTimeoutMsDefault;
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

  return {
    address: signer.address,
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
    sign: (request: EvmSignRequestInput, approval: Approval) => signPayment(signing, request, approval),
    signReplacement: (previous: Hex, fees: ReplacementFees, approval: Approval) =>
      signReplacement(signing, previous, fees, approval),
    signCancel: (previous: Hex, fees: ReplacementFees, approval: Approval) =>
      signCancel(signing, previous, fees, approval),
    async broadcast(rawTransaction: Hex, options: { timeoutMs?: number } = {}) {
      const sender = options.timeoutMs === undefined ? client : makeClient(options.timeoutMs);
      return broadcast(client, sender, rawTransaction);
    },
    lookup: (request: EvmLookupRequest) => lookup(client, request),
    settlement: (request: EvmSettlementRequest) => settlement(client, request),
    async readNonces(address = signer.address) {
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
