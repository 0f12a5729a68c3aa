/**
 * I18: the worker signs withdrawals with a hot-wallet key inside a PKCS#11 token (SoftHSM2,
 * initialised here), on a real PostgreSQL and a real anvil behind a recording proxy. What it
 * proves: a withdrawal signed by the token is confirmed with the token's address as its sender;
 * and a worker SIGKILLed after the token answered but before the signature was persisted leaves
 * the withdrawal recoverable, with never two different signed transactions broadcast for one
 * nonce (an HSM's ECDSA signatures differ on every call, so a second signature is a different
 * transaction: only the persisted one may ever reach the node).
 */

import { type FaultProxy, startFaultProxy } from '@idem/testing/chain';
import { onPostgres } from '@idem/testing/database';
import { initSoftHsmToken, type SoftHsmToken, softHsmModulePath, tokenKey } from '@idem/testing/signer';
import { type Hex, parseTransaction, recoverTransactionAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, ETH, startEnvironment } from './environment.ts';
import { killWorkerAt } from './processes/kill-worker.ts';

const LEASE_MS = 1_500;

describe.skipIf(!onPostgres || !softHsmModulePath())(
  'I18 withdrawals signed by a PKCS#11 token (SoftHSM2, real PostgreSQL, real anvil)',
  () => {
    let token: SoftHsmToken;
    let proxy: FaultProxy;
    let env: Environment;
    let tokenAddress: Hex;

    beforeAll(async () => {
      token = initSoftHsmToken();
      const key = await tokenKey(token, 'hot-wallet-ethereum');
      tokenAddress = key.address;
      env = await startEnvironment({
        rpcUrl: async (anvilUrl) => {
          proxy = await startFaultProxy(anvilUrl);
          return proxy.url;
        },
        hotWallet: { address: key.address, keyRef: key.keyRef },
      });
    });
    afterAll(async () => {
      await proxy?.close();
      await env?.close();
      token?.dispose();
    });

    /** Every distinct signed transaction of the hot wallet that reached the node, by nonce. */
    async function broadcastByNonce(): Promise<Map<number, Set<string>>> {
      const byNonce = new Map<number, Set<string>>();
      for (const raw of proxy.rawTransactions) {
        const sender = await recoverTransactionAddress({ serializedTransaction: raw as never });
        if (sender.toLowerCase() !== tokenAddress.toLowerCase()) continue;
        const nonce = parseTransaction(raw as Hex).nonce ?? -1;
        byNonce.set(nonce, (byNonce.get(nonce) ?? new Set()).add(raw.toLowerCase()));
      }
      return byNonce;
    }

    it('I18 C02 a withdrawal is signed by the token and confirmed on anvil; the on-chain sender is the token address', async () => {
      const op = await env.withdraw(ETH / 4n);
      const worker = env.worker();
      await worker.runOnce();
      const broadcast = await env.operation(op.operationId);
      expect(broadcast.state).toBe('BROADCAST');
      await env.mine(1);
      await worker.runOnce();
      const confirmed = await env.operation(op.operationId);
      expect(confirmed.state).toBe('CONFIRMED');
      const mined = await env.chain.getTransaction({ hash: confirmed.txHash as Hex });
      expect(mined.from.toLowerCase()).toBe(tokenAddress.toLowerCase());
      expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 4n);
    });

    it('I18 C12 a worker SIGKILLed between the token answer and the write: recovered, and one signed transaction per nonce ever broadcast', async () => {
      const op = await env.withdraw(ETH / 8n);
      const sentBefore = proxy.rawTransactions.length;
      await killWorkerAt({
        databaseUrl: env.t.url ?? '',
        rpcUrl: env.rpcUrl,
        chainId: CHAIN_ID,
        step: 'signer-answered',
        leaseMs: LEASE_MS,
        env: token.env,
      });
      // The token signed, the process died before the write: nothing was kept, nothing was sent.
      const afterKill = await env.operation(op.operationId);
      expect(afterKill.state).toBe('APPROVED');
      expect(afterKill.signedArtifact).toBeNull();
      expect(proxy.rawTransactions.length).toBe(sentBefore);

      const rescuer = env.worker();
      await rescuer.runOnce();
      await env.mine(1);
      await rescuer.runOnce();
      const final = await env.operation(op.operationId);
      expect(final.state).toBe('CONFIRMED');
      expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 8n);

      const byNonce = await broadcastByNonce();
      expect(byNonce.size).toBe(2);
      for (const [, distinct] of byNonce) expect(distinct.size).toBe(1);
      expect(byNonce.get(final.chainNonce ?? -1)).toEqual(new Set([final.signedArtifact?.toLowerCase()]));
    });
  },
);
