import {
  advanceCursor,
  type DepositObservation,
  getOperation,
  listDepositAddresses,
  markObservation,
  observationsIn,
  observeDeposit,
  recordDeposit,
  reverseDeposit,
  scanCursor,
  schema,
  withTenant,
} from '@idem/core';
import { and, eq } from 'drizzle-orm';
import type { Address, Hex } from 'viem';
import type { WorkerContext } from '../context.ts';
import { NATIVE_ASSETS } from '../rails.ts';

const { assets } = schema;
const NETWORK = 'ethereum';
/** Blocks scanned per pass, and how far back a credited deposit is re-checked against reorgs. */
const SCAN_BLOCKS_PER_PASS = 100;
const REORG_WINDOW_BLOCKS = 256;

/**
 * The on-chain deposit watcher. Transfers to registered deposit addresses are observed as they are
 * mined, credited (as deposit operations, through the same identity path as everything else, C24)
 * only once their block is as deep as the asset's confirmation policy, and reversed by a
 * compensating entry with a break if a reorganisation removes them after crediting (C17).
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
    const from = await scanCursor(tx, tenantId, NETWORK, Math.max(head - SCAN_BLOCKS_PER_PASS, 0));
    return { addresses, tokens, from };
  });
  if (!setup) return 0;

  let observed = 0;
  if (setup.from <= head) {
    const to = Math.min(head, setup.from + SCAN_BLOCKS_PER_PASS - 1);
    const accountOf = new Map(setup.addresses.map((a) => [a.address.toLowerCase(), a.accountRef]));
    const assetOfToken = new Map(
      setup.tokens
        .filter((a) => a.contractAddress)
        .map((a) => [(a.contractAddress ?? '').toLowerCase(), a.code]),
    );
    const found = await ctx.rails.evmReader().scanDeposits({
      fromBlock: BigInt(setup.from),
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
      await advanceCursor(tx, tenantId, NETWORK, to + 1);
    });
  }

  const depth = new Map(setup.tokens.map((a) => [a.code, a.confirmations]));
  const canonical = async (observation: DepositObservation): Promise<boolean> => {
    const block = await chain.getBlock({ blockNumber: BigInt(observation.blockNumber) }).catch(() => null);
    if (block?.hash === observation.blockHash) return true;
    // Re-mined elsewhere after a reorganisation still counts; gone does not.
    const txHash = observation.depositId.split(':')[0] as Hex;
    const receipt = await chain.getTransactionReceipt({ hash: txHash }).catch(() => null);
    return receipt?.status === 'success';
  };

  const pending = await withTenant(ctx.db, tenantId, (tx) => observationsIn(tx, tenantId, ['seen']));
  for (const observation of pending) {
    if (!(await canonical(observation))) {
      await withTenant(ctx.db, tenantId, (tx) => markObservation(tx, observation, 'orphaned'));
      ctx.log.info(
        { tenantId, depositId: observation.depositId },
        'deposit reorganised out before crediting',
      );
      continue;
    }
    if (head - observation.blockNumber + 1 < (depth.get(observation.assetCode) ?? Number.MAX_SAFE_INTEGER))
      continue;
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
        evidence: { blockNumber: observation.blockNumber, blockHash: observation.blockHash },
      });
      await markObservation(tx, observation, 'credited', claim.operation.operationId);
    });
    ctx.log.info(
      { tenantId, depositId: observation.depositId, asset: observation.assetCode },
      'deposit credited at depth',
    );
  }

  const credited = await withTenant(ctx.db, tenantId, (tx) =>
    observationsIn(tx, tenantId, ['credited'], head - REORG_WINDOW_BLOCKS),
  );
  for (const observation of credited) {
    if (await canonical(observation)) continue;
    await withTenant(ctx.db, tenantId, async (tx) => {
      const deposit = await getOperation(tx, tenantId, observation.operationId ?? '');
      if (deposit.state !== 'CONFIRMED') return;
      await reverseDeposit(tx, {
        deposit,
        actor: 'chain-watcher',
        evidence: { depositId: observation.depositId, blockHash: observation.blockHash },
      });
      await markObservation(tx, observation, 'reversed');
    });
    ctx.log.warn(
      { alert: true, tenantId, depositId: observation.depositId },
      'ALERT credited deposit removed by a reorganisation',
    );
  }
  return observed;
}
