import { listBreaks, withTenant } from '@idem/core';
import { anvilDevPrivateKeys } from '@idem/rails';
import { createWalletClient, getAddress, type Hex, http, TransactionReceiptNotFoundError } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REORG_WINDOW_BLOCKS } from '../src/steps/deposits.ts';
import { type Environment, ETH, rpc, startEnvironment } from './environment.ts';

/**
 * The EVM deposit watcher after downtime longer than its reorganisation window: it
 * resumes from its stored cursor and ends with exactly the deposits the canonical chain holds,
 * each credited once, however the chain was rewritten while nobody watched. Real anvil, real
 * database; the reorganisation is anvil's own (`anvil_reorg`), with one deposit dropped for good
 * and two re-mined lower than where the watcher had already scanned.
 */

let env: Environment;
const depositAddress = getAddress('0x1000000000000000000000000000000000000e0f');
const ACCOUNT = 'acct-recovery';

beforeAll(async () => {
  env = await startEnvironment();
  await env.registerDepositAddress('ethereum', depositAddress, ACCOUNT);
});
afterAll(() => env.close());

/** Each depositor has its own key, so dropping one deposit leaves no nonce gap for the others. */
function depositor(keyIndex: number) {
  return createWalletClient({
    account: privateKeyToAccount(anvilDevPrivateKeys[keyIndex] as Hex),
    transport: http(env.anvil.rpcUrl),
  });
}

async function send(keyIndex: number, value: bigint): Promise<Hex> {
  return depositor(keyIndex).sendTransaction({ chain: null, to: depositAddress, value });
}

const credited = () => env.available(ACCOUNT, 'ETH');

/** What the canonical chain says was deposited: each transaction that has a receipt now. */
async function onChain(sent: { hash: Hex; value: bigint }[]): Promise<bigint> {
  let total = 0n;
  for (const { hash, value } of sent) {
    const receipt = await env.chain.getTransactionReceipt({ hash }).catch((error: unknown) => {
      if (error instanceof TransactionReceiptNotFoundError) return null;
      throw error;
    });
    if (receipt?.status === 'success') total += value;
  }
  return total;
}

async function head(): Promise<number> {
  return Number(await env.chain.getBlockNumber({ cacheTime: 0 }));
}

describe('the deposit watcher after a long downtime', () => {
  it('I13-REC-6 C17 resumes from its cursor after more blocks than the reorg window, with a reorganisation in between: exact credits, none missed, none doubled', async () => {
    const worker = env.worker();
    await worker.runOnce(); // the scan cursor starts here

    // Watched: d1 is credited at depth, d4 is seen but not yet deep enough.
    const d1 = { hash: await send(6, ETH / 2n), value: ETH / 2n };
    await env.mine(2);
    await worker.runOnce();
    await worker.runOnce();
    expect(await credited()).toBe(d1.value);
    const d1Block = Number((await env.chain.getTransactionReceipt({ hash: d1.hash })).blockNumber);
    const d4 = { hash: await send(7, ETH / 4n), value: ETH / 4n };
    await worker.runOnce();
    expect(await credited()).toBe(d1.value);

    // The watcher stops. d2 is mined above where it had scanned, then a reorganisation rewrites
    // everything from d1's block: d1 is dropped for good, d2 and d4 are mined again, lower.
    const d2 = { hash: await send(8, ETH / 8n), value: ETH / 8n };
    await env.mine(5);
    // anvil_reorg replaces the last blocks with new ones holding only the transactions it is given.
    const again = [d4, d2].map(async ({ hash }) => [
      await rpc(env.anvil.rpcUrl, 'eth_getRawTransactionByHash', [hash]),
      0,
    ]);
    await rpc(env.anvil.rpcUrl, 'anvil_reorg', [(await head()) - d1Block + 1, await Promise.all(again)]);
    const d2Block = Number((await env.chain.getTransactionReceipt({ hash: d2.hash })).blockNumber);
    expect(d2Block).toBe(d1Block); // below the cursor the watcher left

    // Far more blocks than the reorganisation window, and one more deposit near the end.
    await env.mine(REORG_WINDOW_BLOCKS + 60);
    const d5 = { hash: await send(9, ETH / 16n), value: ETH / 16n };
    await env.mine(3);
    const sent = [d1, d2, d4, d5];
    const expected = await onChain(sent);
    expect(expected).toBe(d2.value + d4.value + d5.value);

    // A new worker, nothing in memory: it catches up a window per pass. The chain moves on
    // between passes, as it does (a reorganisation is acted on when a later pass sees it again).
    const restarted = env.worker();
    for (let pass = 0; pass < 12; pass++) {
      await restarted.runOnce();
      await env.mine(1);
    }
    expect(await credited()).toBe(expected);

    // d1 was credited and is gone: reversed by a compensating entry, with a break a person owns.
    const breaks = await withTenant(env.t.db, env.tenantId, (tx) =>
      listBreaks(tx, { tenantId: env.tenantId, status: 'open' }),
    );
    expect(breaks.filter((b) => JSON.stringify(b.details).includes(d1.hash))).toHaveLength(1);

    // And it stays exact: more passes change nothing.
    await restarted.runOnce();
    await restarted.runOnce();
    expect(await credited()).toBe(expected);
  });
});
