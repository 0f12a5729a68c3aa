import type { Address, PublicClient } from 'viem';
import { erc20Abi } from 'viem';
import type { EvmDeposit } from './types.ts';

export interface DepositScanRequest {
  /** Inclusive. */
  fromBlock: bigint;
  /** Inclusive; defaults to the head. */
  toBlock?: bigint;
  /** Addresses whose incoming transfers count as deposits. At most 1,000. */
  watched: readonly Address[];
  /** ERC-20 contracts to watch for Transfer logs; empty scans native transfers only. At most 100. */
  tokens?: readonly Address[];
}

const watchedAddressesMax = 1_000;
const tokensMax = 100;
const transferEvent = erc20Abi.find((item) => item.type === 'event' && item.name === 'Transfer');

/**
 * Finds deposits to watched addresses in a block range: top-level native transfers (value > 0,
 * receipt status success) and ERC-20 Transfer logs. Each deposit carries its block hash and
 * confirmations, so the caller credits only past its per-asset depth and can notice a reorg by a
 * changed block hash. Native value moved by contract-internal calls is not seen: that needs traces.
 */
export async function scanDeposits(
  client: PublicClient,
  request: DepositScanRequest,
  scanBlocksMax: number,
): Promise<EvmDeposit[]> {
  const tokens = request.tokens ?? [];
  if (request.watched.length === 0) return [];
  if (request.watched.length > watchedAddressesMax)
    throw new RangeError(`at most ${watchedAddressesMax} watched addresses`);
  if (tokens.length > tokensMax) throw new RangeError(`at most ${tokensMax} tokens per scan`);
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const toBlock = request.toBlock ?? head;
  if (toBlock < request.fromBlock) return [];
  if (toBlock - request.fromBlock + 1n > BigInt(scanBlocksMax)) {
    throw new RangeError(`a scan covers at most ${scanBlocksMax} blocks; split the range`);
  }
  const watched = new Set(request.watched.map((a) => a.toLowerCase()));
  const confirmationsAt = (blockNumber: bigint): number => Number(head - blockNumber + 1n);
  const found: (EvmDeposit & { order: [bigint, number] })[] = [];

  for (let blockNumber = request.fromBlock; blockNumber <= toBlock; blockNumber++) {
    const block = await client.getBlock({ blockNumber, includeTransactions: true });
    for (const tx of block.transactions) {
      if (!tx.to || tx.value === 0n || !watched.has(tx.to.toLowerCase())) continue;
      // A reverted call keeps its value: only a successful receipt moved funds.
      const receipt = await client.getTransactionReceipt({ hash: tx.hash });
      if (receipt.status !== 'success') continue;
      found.push({
        depositId: `${tx.hash}:native`,
        asset: 'native',
        token: null,
        from: tx.from,
        to: tx.to,
        amountMinor: tx.value,
        txHash: tx.hash,
        blockNumber,
        blockHash: block.hash,
        confirmations: confirmationsAt(blockNumber),
        order: [blockNumber, tx.transactionIndex * 2],
      });
    }
  }

  if (tokens.length > 0 && transferEvent) {
    const logs = await client.getLogs({
      address: [...tokens],
      event: transferEvent,
      args: { to: [...request.watched] },
      fromBlock: request.fromBlock,
      toBlock,
    });
    for (const log of logs) {
      const { from, to, value } = log.args;
      if (log.removed || !from || !to || value === undefined || value === 0n) continue;
      if (
        log.blockNumber === null ||
        log.blockHash === null ||
        log.transactionHash === null ||
        log.logIndex === null
      ) {
        continue;
      }
      found.push({
        depositId: `${log.transactionHash}:${log.logIndex}`,
        asset: 'erc20',
        token: log.address,
        from,
        to,
        amountMinor: value,
        txHash: log.transactionHash,
        blockNumber: log.blockNumber,
        blockHash: log.blockHash,
        confirmations: confirmationsAt(log.blockNumber),
        order: [log.blockNumber, (log.transactionIndex ?? 0) * 2 + 1],
      });
    }
  }

  found.sort((a, b) =>
    a.order[0] === b.order[0] ? a.order[1] - b.order[1] : a.order[0] < b.order[0] ? -1 : 1,
  );
  return found.map(({ order: _order, ...deposit }) => deposit);
}
