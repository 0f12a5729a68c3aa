import { IdemError } from '@idem/contracts';
import type { HotWallet } from '@idem/core';
import {
  anvilDevPrivateKeys,
  type CustodianAdapter,
  createEvmRail,
  DEVELOPMENT_CHAIN_IDS,
  type DigestSigner,
  type EvmRail,
  type FeePolicy,
  type FeePolicyInput,
  type FeeQuote,
  feePolicy,
  isPkcs11KeyRef,
  localKeySigner,
  openPkcs11Signer,
  parsePkcs11KeyRef,
  quoteFees,
  remoteSigner,
} from '@idem/rails';
import { createPublicClient, getAddress, type Hex, http, type PublicClient } from 'viem';
import { readKeystore } from './keystore.ts';

/**
 * Which rail moves which asset, and how a hot wallet's key is found. EVM networks go through the
 * tenant's hot wallet on a node; networks the platform does not run a node for (bitcoin here) go
 * through the custodian, which holds the keys.
 */
export interface RailsConfig {
  evm?: {
    rpcUrl: string;
    chainId: number;
    requestTimeoutMs?: number;
    /** This network's fee policy (packages/rails/src/evm/fees.ts); defaults when absent. */
    fees?: FeePolicyInput;
    /** Deadline of one signer call (an HSM signs in milliseconds). Default 10,000 ms. */
    signTimeoutMs?: number;
  };
  custodian?: CustodianAdapter;
  /**
   * Which custodian account the adapter's credentials reach (tenants.custodian_account names it;
   * default 'omnibus'). Tenants of another account are not observed by this deployment.
   */
  custodianAccount?: string;
  /**
   * Where chaos runs and tests put signer faults (an answer held past the deadline, a lost one):
   * it wraps the signer the key reference resolved to. Production leaves it unset.
   */
  decorateSigner?: (signer: DigestSigner) => DigestSigner;
  /**
   * The signer service (`idem signer`, docs/SIGNING.md): hot wallets whose key is in an HSM
   * (`pkcs11:` references) are signed there, with this worker's credential; this process then
   * needs neither the PKCS#11 module nor the PIN. In-process development keys stay in process.
   */
  signerService?: { url: string; token: string };
}

export type Route = { kind: 'evm' } | { kind: 'custodian' };

/** Anvil's (and Hardhat's) chain id: the only chain anvil's public development keys may sign for. */
export const LOCAL_DEVELOPMENT_CHAIN_ID = 31337;

/**
 * The signer a hot wallet's `keyRef` names, in this process. `pkcs11:…` is a key inside an HSM:
 * on a production chain only the signer service (`idem signer`) opens it, so a worker there holds
 * no PIN (I32-SIGNER); in process only on a development chain. Every other form is a key in this
 * process's memory, refused on any chain but a development chain (anvil's public `dev:` keys only
 * on anvil's own chain id).
 */
export function signerFor(keyRef: string, chainId: number): DigestSigner {
  if (isPkcs11KeyRef(keyRef)) {
    if (!DEVELOPMENT_CHAIN_IDS.includes(chainId)) {
      throw new IdemError(
        'VALIDATION',
        `on chain ${chainId} an HSM key is used by the signer service only: set IDEM_SIGNER_URL and IDEM_SIGNER_TOKEN (docs/SIGNING.md)`,
      );
    }
    return openPkcs11Signer(keyRef);
  }
  if (
    !DEVELOPMENT_CHAIN_IDS.includes(chainId) ||
    (keyRef.startsWith('dev:') && chainId !== LOCAL_DEVELOPMENT_CHAIN_ID)
  ) {
    throw new IdemError(
      'VALIDATION',
      `in-process keys are refused on chain ${chainId}: keep the hot wallet's key in an HSM (docs/SIGNING.md)`,
    );
  }
  const kind = keyRef.split(':')[0] ?? 'unknown';
  return localKeySigner(defaultKeyResolver(keyRef), `in-process ${kind} key`);
}

/** The asset each EVM network pays in natively; every other asset there must name its token contract. */
export const NATIVE_ASSETS: Record<string, string> = { ethereum: 'ETH' };

export function routeFor(network: string): Route {
  return network === 'ethereum' ? { kind: 'evm' } : { kind: 'custodian' };
}

/** Where a key reference says the key lives, in words for operators; no secret is in a reference. */
export function keyLocation(keyRef: string): string {
  if (isPkcs11KeyRef(keyRef)) {
    const key = parsePkcs11KeyRef(keyRef);
    return `PKCS#11 token ${key.tokenLabel}, key id ${key.keyId}, module ${key.modulePath}, PIN from ${key.pinRef}`;
  }
  const dev = /^dev:(\d+)$/.exec(keyRef);
  if (dev) return `anvil development key ${dev[1]} (local chain only)`;
  const env = /^env:([A-Z0-9_]+)$/.exec(keyRef);
  if (env) return `in-process key from variable ${env[1]} (development chains only)`;
  const keystore = /^keystore:(\/[^#]+)#([A-Z0-9_]+)$/.exec(keyRef);
  if (keystore) return `in-process key from keystore ${keystore[1]} (development chains only)`;
  return 'unsupported key reference';
}

/**
 * Development keys (`dev:<n>`) are anvil's public test keys and work only against a local node;
 * `env:<NAME>` reads a variable; `keystore:<path>#<NAME>` decrypts a Web3 Secret Storage file
 * with the password in variable NAME. Anything else is refused.
 */
export function defaultKeyResolver(keyRef: string): Hex {
  const dev = /^dev:(\d+)$/.exec(keyRef);
  if (dev) {
    const key = anvilDevPrivateKeys[Number(dev[1])];
    if (!key) throw new IdemError('VALIDATION', `no development key ${keyRef}`);
    return key as Hex;
  }
  const env = /^env:([A-Z0-9_]+)$/.exec(keyRef);
  if (env?.[1]) {
    const value = process.env[env[1]];
    if (!value || !/^0x[0-9a-fA-F]{64}$/.test(value))
      throw new IdemError('VALIDATION', `hot wallet key ${env[1]} is not set`);
    return value as Hex;
  }
  // keystore:<absolute path>#<VARIABLE holding its password>
  const keystore = /^keystore:(\/[^#]+)#([A-Z0-9_]+)$/.exec(keyRef);
  if (keystore?.[1] && keystore[2]) return readKeystore(keystore[1], keystore[2]);
  throw new IdemError('VALIDATION', 'unsupported hot wallet key reference');
}

export class RailRegistry {
  private readonly evmRails = new Map<string, EvmRail>();
  private chainClient: PublicClient | undefined;
  private policy: FeePolicy | undefined;
  /** The chain id the node itself reported, once it matched the configured one. */
  private nodeChainId: number | undefined;
  constructor(readonly config: RailsConfig) {}

  /**
   * Asks the node which chain it serves and refuses a node of another chain than configured. The
   * in-process key guard decides by chain id, and the configured id defaults to anvil's: trusting
   * it alone would let a development key sign for whatever chain the URL reaches. Until this has
   * succeeded, no hot wallet signs. Throws when the node cannot be asked (the caller retries).
   */
  async verifyNodeChain(): Promise<number> {
    if (this.nodeChainId !== undefined) return this.nodeChainId;
    const evm = this.config.evm;
    if (!evm) throw new IdemError('VALIDATION', 'no EVM node is configured');
    const reported = await this.chain().getChainId();
    if (reported !== evm.chainId) {
      throw new IdemError(
        'VALIDATION',
        `the EVM node reports chain ${reported}, not the configured chain ${evm.chainId}: nothing is signed`,
      );
    }
    this.nodeChainId = reported;
    return reported;
  }

  /** The EVM rail signing as this hot wallet (one viem client per wallet, reused). */
  evmFor(wallet: HotWallet): EvmRail {
    const evm = this.config.evm;
    if (!evm) throw new IdemError('VALIDATION', 'no EVM node is configured');
    const cacheKey = `${wallet.tenantId}:${wallet.address}`;
    const existing = this.evmRails.get(cacheKey);
    if (existing) return existing;
    if (this.nodeChainId === undefined) {
      throw new IdemError('VALIDATION', "the EVM node's chain id is not verified yet: nothing is signed");
    }
    const service = this.config.signerService;
    const resolved =
      service && isPkcs11KeyRef(wallet.keyRef)
        ? remoteSigner({ url: service.url, token: service.token, address: getAddress(wallet.address) })
        : signerFor(wallet.keyRef, this.nodeChainId);
    if (resolved.address.toLowerCase() !== wallet.address.toLowerCase()) {
      // The key reference points at another key than the registered wallet: never sign with it.
      throw new IdemError('VALIDATION', `the hot wallet's key does not belong to its registered address`);
    }
    const signer = this.config.decorateSigner ? this.config.decorateSigner(resolved) : resolved;
    const rail = createEvmRail({
      rpcUrl: evm.rpcUrl,
      chainId: evm.chainId,
      signer,
      requestTimeoutMs: evm.requestTimeoutMs ?? 5_000,
      ...(evm.signTimeoutMs === undefined ? {} : { signTimeoutMs: evm.signTimeoutMs }),
    });
    this.evmRails.set(cacheKey, rail);
    return rail;
  }

  /** A chain reader that needs no key (lookups by hash, deposit scans). */
  evmReader(): EvmRail {
    const evm = this.config.evm;
    if (!evm) throw new IdemError('VALIDATION', 'no EVM node is configured');
    const existing = this.evmRails.get('reader');
    if (existing) return existing;
    const rail = createEvmRail({
      rpcUrl: evm.rpcUrl,
      chainId: evm.chainId,
      privateKey: anvilDevPrivateKeys[9],
      requestTimeoutMs: evm.requestTimeoutMs ?? 5_000,
    });
    this.evmRails.set('reader', rail);
    return rail;
  }

  /** A read-only client of the node (receipts, blocks, transactions), one per registry. */
  chain(): PublicClient {
    const evm = this.config.evm;
    if (!evm) throw new IdemError('VALIDATION', 'no EVM node is configured');
    this.chainClient ??= createPublicClient({
      transport: http(evm.rpcUrl, { retryCount: 0, timeout: evm.requestTimeoutMs ?? 5_000 }),
    });
    return this.chainClient;
  }

  custodian(): CustodianAdapter {
    if (!this.config.custodian) throw new IdemError('VALIDATION', 'no custodian is configured');
    return this.config.custodian;
  }

  /** The EVM network's fee policy, validated once. */
  feePolicy(): FeePolicy {
    const evm = this.config.evm;
    if (!evm) throw new IdemError('VALIDATION', 'no EVM node is configured');
    this.policy ??= feePolicy(evm.fees ?? {});
    return this.policy;
  }

  /** What the node says a transaction should offer now (asked each time a transaction is signed). */
  quoteFees(): Promise<FeeQuote> {
    return quoteFees(this.chain(), this.feePolicy());
  }
}
