import type { createPublicClient } from 'viem';
import type { ChainTransfer, ChainView } from './invariants.ts';

/**
 * Reads every canonical block and keeps the transactions sent by hot wallets (with their nonce, so
 * a replacement whose hash nobody recorded still names the withdrawal it replaced) and by the
 * deposit funder.
 */
export async function scanChain(
  chain: ReturnType<typeof createPublicClient>,
  hotWallets: Set<string>,
  funder: string,
): Promise<ChainView> {
  // Not getBlockNumber: viem caches it for seconds, and the scan must see the head as it is now.
  const head = Number((await chain.getBlock({ blockTag: 'latest' })).number);
  const hotWalletTransfers: ChainTransfer[] = [];
  const depositTransfers: ChainTransfer[] = [];
  for (let n = 0; n <= head; n += 1) {
    const block = await chain.getBlock({ blockNumber: BigInt(n), includeTransactions: true });
    for (const tx of block.transactions) {
      if (!tx.to) continue;
      const transfer: ChainTransfer = {
        hash: tx.hash,
        from: tx.from,
        to: tx.to,
        valueWei: tx.value.toString(),
        nonce: tx.nonce,
        blockNumber: n,
      };
      if (hotWallets.has(tx.from.toLowerCase())) hotWalletTransfers.push(transfer);
      else if (tx.from.toLowerCase() === funder.toLowerCase()) depositTransfers.push(transfer);
    }
  }
  return { head, hotWalletTransfers, depositTransfers };
}
