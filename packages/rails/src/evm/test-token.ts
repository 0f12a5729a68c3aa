import { type Address, createPublicClient, createWalletClient, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { testTokenAbi, testTokenBytecode } from './test-token.artifact.ts';

export interface DeployTestTokenOptions {
  rpcUrl: string;
  chainId: number;
  /** The deployer receives the whole supply. */
  privateKey: Hex;
  name?: string;
  symbol?: string;
  decimals?: number;
  supplyMinor: bigint;
  /** How long to wait for the deployment receipt. Default 10 s. */
  timeoutMs?: number;
}

/**
 * Deploys contracts/TestToken.sol (from its committed artifact) to a local chain and waits for the
 * receipt. For tests and local demos only: the token has no owner and mints once.
 */
export async function deployTestToken(options: DeployTestTokenOptions): Promise<Address> {
  const account = privateKeyToAccount(options.privateKey);
  const chain = {
    id: options.chainId,
    name: 'local',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [options.rpcUrl] } },
  } as const;
  const transport = http(options.rpcUrl, { retryCount: 0, timeout: 5_000 });
  const wallet = createWalletClient({ account, chain, transport });
  const reader = createPublicClient({ chain, transport, cacheTime: 0 });
  const hash = await wallet.deployContract({
    abi: testTokenAbi,
    bytecode: testTokenBytecode,
    args: [
      options.name ?? 'Idem Test Token',
      options.symbol ?? 'ITT',
      options.decimals ?? 6,
      options.supplyMinor,
    ],
  });
  const receipt = await reader.waitForTransactionReceipt({
    hash,
    timeout: options.timeoutMs ?? 10_000,
    pollingInterval: 100,
  });
  if (receipt.status !== 'success' || !receipt.contractAddress)
    throw new Error('test token deployment failed');
  return receipt.contractAddress;
}
