/**
 * Invariant 1 against a real chain and a real ledger: a withdrawal paid by the real worker on anvil,
 * then transactions the test signs itself with the hot wallet's key, as a buggy or compromised
 * signer would: a fee replacement nobody recorded, cancels, and a deliberate second payout. I1 must
 * count every transaction of a withdrawal (its recorded hashes, its nonce, its destination and
 * amount) and fire on the second payout, and only there.
 *
 * Needs a real PostgreSQL server (the check reads it with postgres.js as the chaos run does).
 */

import { rpc } from '@idem/testing/chain';
import { serverUrl } from '@idem/testing/database';
import { createWorker, RailRegistry } from '@idem/workers';
import pino from 'pino';
import type { Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanChain } from '../src/chain.ts';
import { atMostOneTransfer, attributeTransfers, withdrawalChainIdentities } from '../src/invariants.ts';
import {
  CHAIN_ID,
  GWEI,
  hotWallet,
  type InvariantFixture,
  noCustodian,
  startInvariantFixture,
} from './support/invariant-fixture.ts';

const databaseUrl = serverUrl();
if (!databaseUrl) console.info('[idem chaos] I1 tests skipped: they need a real PostgreSQL server');

let f: InvariantFixture;

const anvilRpc = (method: string, params: unknown[]) => rpc(f.anvil.rpcUrl, method, params);

/** Signs and sends a transaction from the hot wallet, outside Idem, and returns its hash. */
async function sendFromHotWallet(tx: { to: string; value: bigint; nonce: number; maxFeeGwei: bigint }) {
  const raw = await hotWallet.signTransaction({
    chainId: CHAIN_ID,
    type: 'eip1559',
    to: tx.to as Hex,
    value: tx.value,
    nonce: tx.nonce,
    gas: 21_000n,
    maxFeePerGas: tx.maxFeeGwei * GWEI,
    maxPriorityFeePerGas: tx.maxFeeGwei * GWEI,
  });
  return (await anvilRpc('eth_sendRawTransaction', [raw])) as string;
}

/** A withdrawal the real worker reviewed, signed and broadcast; left in the pool (mining is manual). */
async function broadcastWithdrawal() {
  const operationId = await f.newWithdrawal();
  await f.worker.runOnce();
  const op = await f.operation(operationId);
  expect(op.state).toBe('BROADCAST');
  expect(op.chainNonce).not.toBeNull();
  return op;
}

async function check() {
  const view = await scanChain(f.chain, new Set([hotWallet.address.toLowerCase()]), '0x0');
  return atMostOneTransfer({ sql: f.sql, chain: view, custodian: noCustodian });
}

describe.skipIf(!databaseUrl)('invariant 1 counts every transaction of a withdrawal', () => {
  beforeAll(async () => {
    f = await startInvariantFixture({
      name: 'I1 Exchange',
      confirmations: 2,
      workerId: 'i1-test',
      throughProxy: false,
    });
  });
  afterAll(async () => {
    await f?.dispose();
  });

  it('I12-CHAOS I1 a cancel (zero-value transfer to the hot wallet itself) is no payout: two mined cancels pass', async () => {
    const ops = [await broadcastWithdrawal(), await broadcastWithdrawal()];
    for (const op of ops)
      await sendFromHotWallet({
        to: hotWallet.address,
        value: 0n,
        nonce: op.chainNonce as number,
        maxFeeGwei: 300n,
      });
    await anvilRpc('anvil_mine', ['0x1']);
    const mined = (await scanChain(f.chain, new Set([hotWallet.address.toLowerCase()]), '0x0'))
      .hotWalletTransfers;
    expect(mined.filter((tx) => tx.valueWei === '0')).toHaveLength(2);
    const result = await check();
    expect(result.violations).toEqual([]);
    expect(result.status).toBe('pass');
    expect(result.detail).toContain('2 cancels');
  });

  it("I12-CHAOS I1 a fee replacement nobody recorded is counted as its withdrawal's one transfer, by the wallet's nonce", async () => {
    const op = await broadcastWithdrawal();
    const replacement = await sendFromHotWallet({
      to: op.destination as string,
      value: BigInt(op.amountMinor),
      nonce: op.chainNonce as number,
      maxFeeGwei: 300n,
    });
    expect(replacement.toLowerCase()).not.toBe(op.txHash?.toLowerCase());
    await anvilRpc('anvil_mine', ['0x1']);
    const result = await check();
    expect(result.violations).toEqual([]);
    expect(result.detail).toContain('1 by nonce');
  });

  it('I12-CHAOS I1 a fee bump the worker recorded in signed_attempts and got mined counts by its attempt hash, once', async () => {
    const op = await broadcastWithdrawal();
    // A worker whose policy bumps at once: attempt 2, same nonce, higher fee, replaces the original in the pool.
    const bumper = createWorker({
      db: f.database.db,
      rails: new RailRegistry({
        evm: { rpcUrl: f.anvil.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000 },
      }),
      log: pino({ level: 'silent' }),
      workerId: 'i1-bumper',
      leaseMs: 5_000,
      replacePolicies: { ethereum: { bumpAfterMs: 0, maxBumps: 1 } },
    });
    await bumper.runOnce();
    const [bump] = await f.sql<{ tx_hash: string }[]>`
      select tx_hash from signed_attempts where operation_id = ${op.operationId} and attempt_no = 2`;
    expect(bump?.tx_hash).toBeDefined();
    await anvilRpc('anvil_mine', ['0x1']);
    const mined = (await scanChain(f.chain, new Set([hotWallet.address.toLowerCase()]), '0x0'))
      .hotWalletTransfers;
    const paid = mined.filter((tx) => tx.to.toLowerCase() === op.destination?.toLowerCase());
    expect(paid.map((tx) => tx.hash.toLowerCase())).toEqual([bump?.tx_hash.toLowerCase()]);
    // Known by its recorded hash, not merely guessed from the nonce.
    const identities = await withdrawalChainIdentities(f.sql);
    expect(identities.find((w) => w.operationId === op.operationId)?.hashes).toContain(
      bump?.tx_hash.toLowerCase(),
    );
    const [attributed] = attributeTransfers(identities, paid);
    expect(attributed).toMatchObject({ operationIds: [op.operationId], by: 'hash', cancel: false });
    expect((await check()).violations).toEqual([]);
  });

  it('I12-CHAOS I1 fails when one withdrawal is paid a second time (its destination and amount, another nonce, a hash nobody recorded)', async () => {
    const op = await broadcastWithdrawal();
    await anvilRpc('anvil_mine', ['0x1']);
    expect((await check()).status).toBe('pass');
    const pending = await f.chain.getTransactionCount({ address: hotWallet.address, blockTag: 'pending' });
    const second = await sendFromHotWallet({
      to: op.destination as string,
      value: BigInt(op.amountMinor),
      nonce: pending,
      maxFeeGwei: 300n,
    });
    await anvilRpc('anvil_mine', ['0x1']);
    const result = await check();
    expect(result.status).toBe('fail');
    expect(result.violations).toHaveLength(1);
    expect(result.violations[0]).toContain(op.operationId);
    expect(result.violations[0]).toContain(`${op.txHash} (by hash)`);
    expect(result.violations[0]).toContain(`${second} (by destination+amount)`);
  });
});
