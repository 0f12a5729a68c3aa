/**
 * I18-SENT liveness after a signer timeout, on a real PostgreSQL and a real anvil behind the
 * recording proxy: the signer signs, then its answer is lost (held until after the worker's
 * deadline), as the chaos run's `signer-timeout` fault does. The withdrawal must neither stay
 * claimed nor be left APPROVED forever: the next pass signs it afresh and it is confirmed, and the
 * late signature never reaches the node. (An HSM run with "27 of 31 stuck": this rules out a
 * withdrawal parked by a SIGNER_UNAVAILABLE.)
 */
import { listAttempts, withTenant } from '@idem/core';
import type { DigestSignature, DigestSigner } from '@idem/rails';
import { type FaultProxy, startFaultProxy } from '@idem/testing/chain';
import { onPostgres } from '@idem/testing/database';
import { type Hex, keccak256, parseTransaction } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, ETH, startEnvironment } from './environment.ts';

/** A signer whose answers are held while `gate` is closed: the key signed, the caller never hears. */
function losingAnswers(): {
  decorate: (signer: DigestSigner) => DigestSigner;
  close: () => void;
  open: () => void;
  late: Promise<DigestSignature>[];
} {
  let held: Promise<void> | null = null;
  let release: () => void = () => {};
  const late: Promise<DigestSignature>[] = [];
  return {
    late,
    close() {
      held = new Promise<void>((resolve) => {
        release = resolve;
      });
    },
    open() {
      held = null;
      release();
    },
    decorate: (signer) => ({
      address: signer.address,
      location: signer.location,
      signDigest(digest: Hex) {
        const gate = held;
        const answer = signer.signDigest(digest).then(async (signature) => {
          if (gate) await gate;
          return signature;
        });
        if (gate) late.push(answer);
        return answer;
      },
    }),
  };
}

describe.skipIf(!onPostgres)(
  'I18-SENT a signer timeout leaves the withdrawal live (real PostgreSQL, real anvil)',
  () => {
    let proxy: FaultProxy;
    let env: Environment;
    const fault = losingAnswers();

    beforeAll(async () => {
      env = await startEnvironment({
        mining: 'manual',
        rpcUrl: async (anvilUrl) => {
          proxy = await startFaultProxy(anvilUrl);
          return proxy.url;
        },
      });
    });
    afterAll(async () => {
      fault.open();
      await proxy?.close();
      await env?.close();
    });

    it('I18-SENT after SIGNER_UNAVAILABLE nothing is kept, claimed or sent; the next pass signs afresh and the withdrawal is confirmed, the late signature never sent', async () => {
      const worker = env.worker({
        rails: {
          evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000, signTimeoutMs: 1_500 },
          decorateSigner: fault.decorate,
        },
      });
      const op = await env.withdraw(ETH / 5n);
      const sentBefore = proxy.rawTransactions.length;

      fault.close();
      await worker.runOnce();
      expect(fault.late).toHaveLength(1);
      const afterTimeout = await env.operation(op.operationId);
      expect(afterTimeout.state).toBe('APPROVED');
      expect(afterTimeout.signedArtifact).toBeNull();
      expect(afterTimeout.chainNonce).toBeNull();
      expect(afterTimeout.leaseOwner).toBeNull();
      // The funds stay held for it.
      expect(await env.available('acct-1', 'ETH')).toBe(1000n * ETH - ETH / 5n);
      expect(proxy.rawTransactions.length).toBe(sentBefore);
      expect(env.logLines.some((line) => line.includes('the signer did not answer'))).toBe(true);

      // The lost answer arrives now, after its deadline: it must be dropped.
      fault.open();
      const lateSignature = await fault.late[0];
      expect(lateSignature).toBeDefined();

      await worker.runOnce();
      const sent = await env.operation(op.operationId);
      expect(sent.state).toBe('BROADCAST');
      await env.mine(2);
      await worker.runOnce();
      const final = await env.operation(op.operationId);
      expect(final.state).toBe('CONFIRMED');
      expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 5n);

      // Exactly one signed transaction reached the node for that nonce: the stored one.
      const sentForNonce = proxy.rawTransactions
        .slice(sentBefore)
        .filter((raw) => parseTransaction(raw as Hex).nonce === final.chainNonce)
        .map((raw) => keccak256(raw as Hex));
      expect(new Set(sentForNonce)).toEqual(new Set([final.txHash]));
    });

    it('I18-SENT a fee bump whose signer answer is lost records nothing and sends nothing; the next pass bumps and the withdrawal is confirmed', async () => {
      const worker = env.worker({
        rails: {
          evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000, signTimeoutMs: 1_500 },
          decorateSigner: fault.decorate,
        },
        // Bumped as soon as it is seen unmined (the pool is mined only by the test).
        replacePolicies: { ethereum: { bumpAfterMs: 0, maxBumps: 3 } },
      });
      const attemptsOf = (operationId: string) =>
        withTenant(env.t.db, env.tenantId, (tx) => listAttempts(tx, env.tenantId, operationId));
      const op = await env.withdraw(ETH / 7n);
      // Sent first by a worker that does not bump yet.
      await env
        .worker({ replacePolicies: { ethereum: { bumpAfterMs: 60 * 60_000, maxBumps: 3 } } })
        .runOnce();
      expect((await env.operation(op.operationId)).state).toBe('BROADCAST');
      expect((await attemptsOf(op.operationId)).map((a) => a.kind)).toEqual(['original']);
      const sentBefore = proxy.rawTransactions.length;
      const lateBefore = fault.late.length;

      fault.close();
      await worker.runOnce();
      expect(fault.late.length).toBeGreaterThan(lateBefore);
      expect((await attemptsOf(op.operationId)).map((a) => a.kind)).toEqual(['original']);
      // Only the stored original may have been resent; no new signature reached the node.
      const stored = (await env.operation(op.operationId)).txHash;
      for (const raw of proxy.rawTransactions.slice(sentBefore)) expect(keccak256(raw as Hex)).toBe(stored);
      expect((await env.operation(op.operationId)).state).toBe('BROADCAST');
      fault.open();
      await Promise.all(fault.late);

      await worker.runOnce();
      const attempts = await attemptsOf(op.operationId);
      expect(attempts.map((a) => a.kind)).toEqual(['original', 'replacement']);
      await env.mine(3);
      await worker.runOnce();
      const final = await env.operation(op.operationId);
      expect(final.state).toBe('CONFIRMED');
      expect(await env.balanceOf(op.destination ?? '')).toBe(ETH / 7n);
      // Every signature of that nonce that reached the node is one the ledger recorded.
      const recorded = new Set([final.txHash, ...attempts.map((a) => a.txHash)]);
      for (const raw of proxy.rawTransactions.slice(sentBefore))
        expect(recorded.has(keccak256(raw as Hex))).toBe(true);
    });
  },
);
