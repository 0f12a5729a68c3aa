/**
 * I18-SENT: the `sent-only-persisted` invariant's own method, against a real ledger, a real worker
 * and a real anvil behind the recording proxy the chaos run uses. The HSM signer's work stayed open on one
 * violation seen in a run that did not converge (27 of 31 withdrawals stuck): the workers were
 * still signing and sending while the evidence was read. A check that reads the ledger first and
 * the node's list of sent transactions later reports a transaction signed, stored and sent in
 * between as "never stored". These tests fix the order (what reached the node is taken first,
 * then the ledger is read) and keep the check able to fail on a real unpersisted send.
 *
 * Needs a real PostgreSQL server (the check reads it with postgres.js as the chaos run does).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FaultProxy } from '@idem/testing/chain';
import { serverUrl } from '@idem/testing/database';
import type { Sql } from 'postgres';
import { type Hex, keccak256 } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanChain } from '../src/chain.ts';
import { newDepositLog } from '../src/deposits.ts';
import { workerLinesAbout } from '../src/evidence.ts';
import { newIntegratorLog } from '../src/integrators.ts';
import { type CheckResult, checkInvariants } from '../src/invariants.ts';
import {
  CHAIN_ID,
  GWEI,
  hotWallet,
  type InvariantFixture,
  noCustodian,
  startInvariantFixture,
} from './support/invariant-fixture.ts';

const databaseUrl = serverUrl();
if (!databaseUrl) console.info('[idem chaos] I18-SENT tests skipped: they need a real PostgreSQL server');

let f: InvariantFixture;
/** The recording proxy between the worker and the node. */
const proxy = (): FaultProxy => f.proxy as FaultProxy;

/**
 * The ledger reader the check is given, which lets `during` run once, right after the check read
 * which transaction hashes the ledger stored: a live worker acting while the evidence is gathered.
 */
function racing(base: Sql, during: () => Promise<void>): Sql {
  let pending: (() => Promise<void>) | null = during;
  const tag = (strings: TemplateStringsArray, ...values: unknown[]) =>
    (base(strings, ...(values as never[])) as unknown as Promise<unknown>).then(async (rows) => {
      const readHashes = strings.join('$').includes('as hashes');
      const run = readHashes ? pending : null;
      if (run) {
        pending = null;
        await run();
      }
      return rows;
    });
  return tag as unknown as Sql;
}

async function sentOnlyPersisted(reader: Sql): Promise<CheckResult> {
  const view = await scanChain(f.chain, new Set([hotWallet.address.toLowerCase()]), '0x0');
  const checks = await checkInvariants({
    sql: reader,
    balanceRuns: [],
    tenants: [{ index: 0, tenantId: f.tenantId, hotWallet: hotWallet.address, ethConfirmations: 1 }],
    custodianTenantId: f.tenantId,
    chain: view,
    custodian: noCustodian,
    integrators: newIntegratorLog(),
    deposits: newDepositLog(),
    landed: { depositWatcher: true, inboxProcessing: true, reconciliation: true },
    broadcast: proxy().rawTransactions,
    broadcastAt: proxy().rawTransactionsAt,
  });
  const check = checks.find((c) => c.id === 'sent-only-persisted');
  if (!check) throw new Error('no sent-only-persisted check in the results');
  return check;
}

describe.skipIf(!databaseUrl)(
  'I18-SENT the sent-only-persisted invariant judges one consistent moment',
  () => {
    beforeAll(async () => {
      f = await startInvariantFixture({
        name: 'I18 Exchange',
        confirmations: 1,
        workerId: 'i18-sent',
        throughProxy: true,
      });
    });
    afterAll(async () => {
      await f?.dispose();
    });

    it('I18-SENT a withdrawal a live worker signs, stores and sends while the check reads the ledger is not reported as never stored', async () => {
      // One withdrawal sent before the check starts: the check has something to judge.
      const before = await f.newWithdrawal();
      await f.worker.runOnce();
      expect((await f.operation(before)).state).toBe('BROADCAST');
      // Another is signed, committed and sent by the worker after the check's first ledger read.
      const during = await f.newWithdrawal();
      const check = await sentOnlyPersisted(
        racing(f.sql, async () => {
          await f.worker.runOnce();
        }),
      );
      const raced = await f.operation(during);
      expect(raced.state).toBe('BROADCAST');
      // The worker's order held: the bytes were stored before they were sent.
      expect(proxy().rawTransactions.map((raw) => raw.toLowerCase())).toContain(
        raced.signedArtifact?.toLowerCase(),
      );
      expect(check.violations).toEqual([]);
      expect(check.status).toBe('pass');
    });

    it('I18-SENT a hot-wallet transaction that reached the node and was never stored is reported with its hash, sender, nonce and what the ledger holds for that nonce', async () => {
      const op = await f.newWithdrawal();
      await f.worker.runOnce();
      const stored = await f.operation(op);
      expect(stored.state).toBe('BROADCAST');
      // A second signature of the same nonce, sent through the same node path, never stored:
      // what an HSM answer used after its deadline would be.
      const rogue = await hotWallet.signTransaction({
        chainId: CHAIN_ID,
        type: 'eip1559',
        to: stored.destination as Hex,
        value: BigInt(stored.amountMinor),
        nonce: stored.chainNonce ?? 0,
        gas: 21_000n,
        maxFeePerGas: 900n * GWEI,
        maxPriorityFeePerGas: 900n * GWEI,
      });
      await fetch(proxy().url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_sendRawTransaction', params: [rogue] }),
      });
      const check = await sentOnlyPersisted(f.sql);
      expect(check.status).toBe('fail');
      expect(check.violations).toHaveLength(1);
      const violation = check.violations[0] ?? '';
      expect(violation).toContain(keccak256(rogue));
      expect(violation.toLowerCase()).toContain(hotWallet.address.toLowerCase());
      expect(violation).toContain(`nonce ${stored.chainNonce}`);
      // What the ledger stored for that wallet and nonce, and who signed it under which lease.
      expect(violation).toContain(op);
      expect(violation).toContain(stored.txHash ?? 'no hash');
      expect(violation).toContain('i18-sent');
      expect(violation).toMatch(/lease generation \d+/);
      // Still not stored when read again after the check: a real leak, not a race of the check.
      expect(violation).toContain('not stored when read again');
    });
  },
);

describe('I18-SENT an unstored transaction is traced in the worker logs', () => {
  it('I18-SENT the worker log lines naming the withdrawals of a violation are attached, oldest first', () => {
    const dir = mkdtempSync(join(tmpdir(), 'idem-sent-'));
    const id = '5ba96317-c4c1-4325-8582-29b0f3f8f169';
    writeFileSync(
      join(dir, 'worker-0.log'),
      [
        `{"level":40,"time":"2026-11-30T22:17:24.000Z","operationId":"${id}","msg":"the signer did not answer; no replacement recorded"}`,
        '{"level":40,"time":"2026-11-30T22:17:25.000Z","operationId":"00000000-0000-0000-0000-000000000000","msg":"unrelated"}',
      ].join('\n'),
    );
    writeFileSync(
      join(dir, 'worker-1.log'),
      `{"level":40,"time":"2026-11-30T22:17:20.000Z","operationId":"${id}","msg":"send outcome not known: UNKNOWN"}\n`,
    );
    writeFileSync(
      join(dir, 'server-0.log'),
      `{"time":"2026-11-30T22:17:19.000Z","operationId":"${id}","msg":"x"}\n`,
    );
    const lines = workerLinesAbout(dir, [
      `hot wallet 0x1 sent 0x2 ...; stored for that nonce: withdrawal ${id} (BROADCAST)`,
    ]);
    expect(lines).toEqual([
      `worker log worker-1.log: 2026-11-30T22:17:20.000Z send outcome not known: UNKNOWN (operation ${id})`,
      `worker log worker-0.log: 2026-11-30T22:17:24.000Z the signer did not answer; no replacement recorded (operation ${id})`,
    ]);
    expect(workerLinesAbout(dir, ['no withdrawal named'])).toEqual([]);
  });
});
