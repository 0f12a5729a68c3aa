import {
  advanceCursor,
  type DepositObservation,
  getOperation,
  listDepositAddresses,
  markObservation,
  observationsIn,
  observeDeposit,
  recordCanonical,
  recordDeposit,
  recordReplaced,
  reverseDeposit,
  rewindCursor,
  type ScanPosition,
  scanPosition,
  schema,
  withTenant,
} from '@idem/core';
import { and, eq } from 'drizzle-orm';
import {
  type Address,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
} from 'viem';
import type { WorkerContext } from '../context.ts';
import { NATIVE_ASSETS } from '../rails.ts';

const { assets } = schema;
const NETWORK = 'ethereum';
/**
 * Blocks scanned per pass, and how far back a credited deposit is re-checked against reorgs (and
 * how far the scan goes back over a stretch rewritten below its cursor).
 */
const SCAN_BLOCKS_PER_PASS = 100;
export const REORG_WINDOW_BLOCKS = 256;

/**
 * The on-chain deposit watcher. Transfers to registered deposit addresses are observed as they are
 * mined, credited (as deposit operations, through the same identity path as everything else, C24)
 * only once their block is as deep as the asset's confirmation policy, and reversed by a
 * compensating entry with a break if a reorganisation removes them after crediting (C17). A
 * reorganisation is a positive answer seen on two passes: a failed, slow or lagging
 * node is no evidence and changes nothing; an orphaned deposit whose transaction reappears is
 * seen again and credited at depth.
 *
 * After downtime it resumes from its cursor a window per pass. Two things keep that
 * exact however long it was away: the cursor keeps the hash of the last block scanned, and when
 * the canonical block there has another hash the chain was rewritten below the cursor, so the scan
 * goes back a reorganisation window over it (a deposit re-mined lower is found; seeing one again
 * changes nothing); and credited deposits are re-checked against the window behind the scan, not
 * behind the head, so one removed while nobody watched is still reversed.
 */
export async function watchDeposits(ctx: WorkerContext, tenantId: string): Promise<number> {
  const evm = ctx.rails.config.evm;
  if (!evm) return 0;
  const addresses = await withTenant(ctx.db, tenantId, (tx) => listDepositAddresses(tx, tenantId, NETWORK));
  if (addresses.length === 0) return 0;
  const chain = ctx.rails.chain();
  const head = Number(await chain.getBlockNumber({ cacheTime: 0 }));
  const setup = await withTenant(ctx.db, tenantId, async (tx) => {
    const tokens = await tx
      .select()
      .from(assets)
      .where(and(eq(assets.tenantId, tenantId), eq(assets.network, NETWORK)));
    const position = await scanPosition(tx, tenantId, NETWORK, Math.max(head - SCAN_BLOCKS_PER_PASS, 0));
    return { addresses, tokens, position };
  });
  if (!setup) return 0;
  const from = await resumeFrom(ctx, tenantId, chain, head, setup.position);
  const observed = from <= head ? await scanBlocks(ctx, tenantId, chain, from, head, setup) : 0;

  const depth = new Map(setup.tokens.map((a) => [a.code, a.confirmations]));
  const pass: DepositPass = {
    ctx,
    tenantId,
    head,
    // The window is behind the scan, not the head: after downtime the scan is far behind, and what
    // happened while nobody watched is still looked at.
    windowStart: Math.min(head, from) - REORG_WINDOW_BLOCKS,
    read: (observation) => readBlock(chain, observation),
    deepEnough: (assetCode, blockNumber) =>
      head - blockNumber + 1 >= (depth.get(assetCode) ?? Number.MAX_SAFE_INTEGER),
  };
  await reobserveOrphaned(pass);
  await creditAtDepth(pass);
  await recheckCredited(pass);
  return observed;
}

/** What the re-checks of one pass share: the head it read, the window behind the scan, the reads. */
interface DepositPass {
  ctx: WorkerContext;
  tenantId: string;
  head: number;
  windowStart: number;
  read: (observation: DepositObservation) => Promise<BlockReading>;
  deepEnough: (assetCode: string, blockNumber: number) => boolean;
}

/** Scans the blocks from `from` (a pass's window at most) and observes transfers to the tenant's addresses. */
async function scanBlocks(
  ctx: WorkerContext,
  tenantId: string,
  chain: PublicClient,
  from: number,
  head: number,
  setup: {
    addresses: Awaited<ReturnType<typeof listDepositAddresses>>;
    tokens: (typeof assets.$inferSelect)[];
  },
): Promise<number> {
  let observed = 0;
  const to = Math.min(head, from + SCAN_BLOCKS_PER_PASS - 1);
  const accountOf = new Map(setup.addresses.map((a) => [a.address.toLowerCase(), a.accountRef]));
  const assetOfToken = new Map(
    setup.tokens
      .filter((a) => a.contractAddress)
      .map((a) => [(a.contractAddress ?? '').toLowerCase(), a.code]),
  );
  // Read before the scan: a rewrite after this read shows as a mismatch on the next pass.
  const last = await chain.getBlock({ blockNumber: BigInt(to) });
  const found = await ctx.rails.evmReader().scanDeposits({
    fromBlock: BigInt(from),
    toBlock: BigInt(to),
    watched: setup.addresses.map((a) => a.address as Address),
    tokens: [...assetOfToken.keys()] as Address[],
  });
  await withTenant(ctx.db, tenantId, async (tx) => {
    for (const deposit of found) {
      const assetCode = deposit.token
        ? assetOfToken.get(deposit.token.toLowerCase())
        : NATIVE_ASSETS[NETWORK];
      const accountRef = accountOf.get(deposit.to.toLowerCase());
      if (!assetCode || !accountRef) continue;
      const fresh = await observeDeposit(tx, {
        tenantId,
        depositId: deposit.depositId,
        network: NETWORK,
        accountRef,
        assetCode,
        amountMinor: deposit.amountMinor.toString(),
        blockNumber: Number(deposit.blockNumber),
        blockHash: deposit.blockHash,
      });
      if (fresh) observed += 1;
    }
    await advanceCursor(tx, tenantId, NETWORK, to + 1, last.hash ?? undefined);
  });
  return observed;
}

/** Orphaned, but its transaction is in a canonical block again: seen again, at that block. */
async function reobserveOrphaned({ ctx, tenantId, windowStart, read }: DepositPass): Promise<void> {
  const orphaned = await withTenant(ctx.db, tenantId, (tx) =>
    observationsIn(tx, tenantId, ['orphaned'], windowStart),
  );
  for (const observation of orphaned) {
    const reading = await read(observation);
    if (reading.kind !== 'canonical') continue;
    await withTenant(ctx.db, tenantId, (tx) =>
      observeDeposit(tx, {
        tenantId,
        depositId: observation.depositId,
        network: observation.network,
        accountRef: observation.accountRef,
        assetCode: observation.assetCode,
        amountMinor: observation.amountMinor,
        blockNumber: reading.blockNumber,
        blockHash: reading.blockHash,
      }),
    );
    ctx.log.info({ tenantId, depositId: observation.depositId }, 'orphaned deposit is on chain again');
  }
}

/** Seen deposits: orphaned when replaced (seen twice), credited once their block is deep enough. */
async function creditAtDepth({ ctx, tenantId, head, read, deepEnough }: DepositPass): Promise<void> {
  const pending = await withTenant(ctx.db, tenantId, (tx) => observationsIn(tx, tenantId, ['seen']));
  for (const observation of pending) {
    const reading = await read(observation);
    // No answer (an error, a timeout, a node without that block) is no evidence: nothing changes.
    if (reading.kind === 'no_answer') continue;
    if (reading.kind === 'replaced') {
      const act = await withTenant(ctx.db, tenantId, async (tx) => {
        if (!(await recordReplaced(tx, observation, { head, otherHash: reading.otherHash }))) return false;
        return markObservation(tx, observation, 'orphaned');
      });
      if (act) {
        ctx.log.info(
          { tenantId, depositId: observation.depositId },
          'deposit reorganised out before crediting',
        );
      }
      continue;
    }
    await withTenant(ctx.db, tenantId, (tx) => recordCanonical(tx, observation, reading));
    if (!deepEnough(observation.assetCode, reading.blockNumber)) continue;
    await withTenant(ctx.db, tenantId, async (tx) => {
      const claim = await recordDeposit(tx, {
        tenantId,
        deposit: {
          reference: observation.depositId,
          accountId: observation.accountRef,
          asset: observation.assetCode,
          amountMinor: observation.amountMinor,
        },
        idempotencyKey: `deposit-chain-${observation.depositId}`,
        actor: 'chain-watcher',
        evidence: { blockNumber: reading.blockNumber, blockHash: reading.blockHash },
      });
      await markObservation(tx, observation, 'credited', claim.operation.operationId);
    });
    ctx.log.info(
      { tenantId, depositId: observation.depositId, asset: observation.assetCode },
      'deposit credited at depth',
    );
  }
}

/** A credited deposit with a reorganisation sighted stays under re-check until it is settled. */
async function recheckCredited({ ctx, tenantId, head, windowStart, read }: DepositPass): Promise<void> {
  const credited = await withTenant(ctx.db, tenantId, (tx) =>
    observationsIn(tx, tenantId, ['credited'], windowStart, { sightingPending: true }),
  );
  for (const observation of credited) {
    const reading = await read(observation);
    if (reading.kind === 'no_answer') continue;
    if (reading.kind === 'canonical') {
      await withTenant(ctx.db, tenantId, (tx) => recordCanonical(tx, observation, reading));
      continue;
    }
    const reversed = await withTenant(ctx.db, tenantId, async (tx) => {
      // The first sighting is only recorded; a later pass at a higher head must see it again.
      if (!(await recordReplaced(tx, observation, { head, otherHash: reading.otherHash }))) return false;
      const deposit = await getOperation(tx, tenantId, observation.operationId ?? '');
      if (deposit.state !== 'CONFIRMED') return false;
      await reverseDeposit(tx, {
        deposit,
        actor: 'chain-watcher',
        evidence: {
          depositId: observation.depositId,
          blockHash: observation.blockHash,
          replacedBy: reading.otherHash,
          firstSeenAtHead: observation.mismatchHead,
          seenAgainAtHead: head,
        },
      });
      await markObservation(tx, observation, 'reversed');
      return true;
    });
    if (!reversed) continue;
    ctx.log.warn(
      { alert: true, tenantId, depositId: observation.depositId },
      'ALERT credited deposit removed by a reorganisation',
    );
  }
}

/**
 * Where this pass scans from. When the block just below the cursor is no longer the one the last
 * scan read, the chain was rewritten there: go back a reorganisation window and scan it again. A
 * node that answers wrongly costs a rescan, never a deposit (observing one again changes nothing).
 */
async function resumeFrom(
  ctx: WorkerContext,
  tenantId: string,
  chain: PublicClient,
  head: number,
  position: ScanPosition,
): Promise<number> {
  const below = position.nextBlock - 1;
  if (position.scannedHash === null || below < 0 || below > head) return position.nextBlock;
  const block = await chain.getBlock({ blockNumber: BigInt(below) });
  if (block.hash === position.scannedHash) return position.nextBlock;
  const back = Math.max(position.nextBlock - REORG_WINDOW_BLOCKS, 0);
  const moved = await withTenant(ctx.db, tenantId, (tx) =>
    rewindCursor(tx, tenantId, NETWORK, position, back),
  );
  if (!moved) return position.nextBlock;
  ctx.log.warn(
    { tenantId, network: NETWORK, from: position.nextBlock, to: back },
    'chain rewritten below the deposit scan cursor: scanning back over it',
  );
  return back;
}

/**
 * What the node positively says about an observation's block. Only two answers act:
 * its transaction in a canonical block (where it was, or re-mined elsewhere with the same transfer),
 * or another block at its height with the transaction in none. Anything else (an error, a timeout,
 * a node that does not have the block yet, a node contradicting itself) is no answer.
 */
type BlockReading =
  | { kind: 'canonical'; blockNumber: number; blockHash: string }
  | { kind: 'replaced'; otherHash: string }
  | { kind: 'no_answer' };

async function readBlock(chain: PublicClient, observation: DepositObservation): Promise<BlockReading> {
  try {
    const block = await chain.getBlock({ blockNumber: BigInt(observation.blockNumber) });
    if (!block.hash) return { kind: 'no_answer' };
    if (block.hash === observation.blockHash)
      return { kind: 'canonical', blockNumber: observation.blockNumber, blockHash: block.hash };
    const [txHash, part] = observation.depositId.split(':') as [Hex, string];
    const receipt = await chain.getTransactionReceipt({ hash: txHash }).catch((error: unknown) => {
      if (error instanceof TransactionReceiptNotFoundError) return null;
      throw error;
    });
    if (!receipt) return { kind: 'replaced', otherHash: block.hash };
    const at = await chain.getBlock({ blockNumber: receipt.blockNumber });
    if (at.hash !== receipt.blockHash) return { kind: 'no_answer' };
    if (receipt.status === 'success' && sameTransfer(receipt, part, observation.amountMinor)) {
      return { kind: 'canonical', blockNumber: Number(receipt.blockNumber), blockHash: receipt.blockHash };
    }
    // Mined elsewhere without this transfer (reverted, or the token transfer at another log index,
    // which the scan records as a deposit of its own): this one is gone.
    return { kind: 'replaced', otherHash: block.hash };
  } catch {
    return { kind: 'no_answer' };
  }
}

const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

/** Native: the same transaction is the same transfer. A token: the same Transfer at the same log index. */
function sameTransfer(receipt: TransactionReceipt, part: string, amountMinor: string): boolean {
  if (part === 'native') return true;
  const log = receipt.logs.find((l) => l.logIndex === Number(part));
  return log?.topics[0] === TRANSFER_TOPIC && log.data !== '0x' && BigInt(log.data) === BigInt(amountMinor);
}
