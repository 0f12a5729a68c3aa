/**
 * I33-FREEZE at the last line: the signer service reads the freezes itself, in the snapshot it
 * checks the approval in, and signs no payment under a freeze in force (docs/GOVERNANCE.md
 * "Freeze", docs/SIGNING.md). The claim already skips frozen withdrawals; here an attacker who can
 * write every table (the owner's login with triggers off, as in signer-trust.test.ts) claims a
 * frozen account's approved withdrawal anyway and asks the service to sign it: refused, with the
 * stable code FROZEN, in its log. A fee bump or a cancel of an attempt already broadcast is still
 * signed: settling what is on chain is never held. Seen failing first: the service signed the
 * frozen withdrawal.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  freeze,
  getHotWallet,
  type Operation,
  provisionHotWallet,
  reviewWithdrawal,
  rowsOf,
  withTenant,
} from '@idem/core';
import { type AnvilInstance, startAnvil } from '@idem/rails';
import { ETH } from '@idem/testing/chain';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { initSoftHsmToken, type SoftHsmToken, softHsmModulePath, tokenKey } from '@idem/testing/signer';
import { provisionRiskPolicy, staffMember } from '@idem/testing/tenants';
import { createWorker, RailRegistry } from '@idem/workers';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { type Address, getAddress, type Hex, serializeTransaction } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSignerProcess, stopSignerProcess } from '../scripts/signer-process.ts';
import type { SignerLogLine } from '../src/signer-service/log.ts';
import { idem } from './support/cli-process.ts';
import { createSignerLogin, type SignerLogin, signerServiceEnv } from './support/signer-service.ts';

const CHAIN_ID = 31337;
const ORIGIN = 'https://staff.idem.test';

describe.skipIf(!onPostgres || !softHsmModulePath())(
  'I33-FREEZE the signer service signs nothing new under a freeze in force (own process, SoftHSM2, real PostgreSQL)',
  () => {
    let token: SoftHsmToken;
    let t: TestDatabase;
    let tenantId: string;
    let dir: string;
    let logPath: string;
    let signer: ChildProcess | undefined;
    let signerUrl: string;
    let walletAddress: Address;
    let operator: string;
    const workerToken = randomBytes(24).toString('hex');
    let login: SignerLogin | undefined;

    const inTenant = <T>(work: Parameters<typeof withTenant<T>>[2]) => withTenant(t.db, tenantId, work);

    /** Writes as someone holding every table: the owner's login, the database's own guards off. */
    const asOwnerWithoutGuards = (
      work: (tx: Parameters<Parameters<typeof t.db.transaction>[0]>[0]) => Promise<void>,
    ) =>
      t.db.transaction(async (tx) => {
        await tx.execute(sql`set local session_replication_role = replica`);
        await work(tx);
      });

    beforeAll(async () => {
      token = initSoftHsmToken();
      const key = await tokenKey(token, 'hot-wallet-ethereum');
      walletAddress = key.address;
      t = await createTestDatabase({ maxConnections: 6 });
      ({ tenantId } = await createTenant(t.db, {
        name: 'Freezing Exchange',
        assets: [{ code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 1 }],
      }));
      await provisionHotWallet(t.db, {
        tenantId,
        network: 'ethereum',
        address: key.address,
        keyRef: key.keyRef,
      });
      for (const accountId of ['acct-frozen', 'acct-free']) {
        await creditAsOperator(t.db, {
          tenantId,
          deposit: {
            reference: `seed-${accountId}`,
            accountId,
            asset: 'ETH',
            amountMinor: (50n * ETH).toString(),
          },
          idempotencyKey: `seed-${accountId}`,
          actor: 'test',
        });
      }
      // Withdrawals up to 1 ETH are approved by the automatic review, within the pinned limit.
      await provisionRiskPolicy(t.db, {
        tenantId,
        assetCode: 'ETH',
        autoApproveMaxMinor: ETH.toString(),
        fourEyesMinMinor: (100n * ETH).toString(),
        velocityMaxPerHour: 1000,
      });
      operator = await staffMember(t.db, tenantId, 'operator');
      dir = mkdtempSync(join(tmpdir(), 'idem-signer-freeze-'));
      const trustFile = join(dir, 'trust.json');
      const pinned = await idem(
        { DATABASE_URL: t.url ?? '' },
        ...['signer', 'pin', '--tenant', tenantId, '--origin', ORIGIN, '--file', trustFile, '--json'],
      );
      expect(pinned.code, pinned.stderr).toBe(0);

      login = await createSignerLogin(t, 'idem_signer_freeze');
      logPath = join(dir, 'signer-log.jsonl');
      ({ child: signer, url: signerUrl } = await startSignerProcess(
        signerServiceEnv({ token, workerToken, login, chainId: CHAIN_ID, logPath, trustFile }),
      ));
    });
    afterAll(async () => {
      await stopSignerProcess(signer);
      await t?.dispose();
      await login?.drop();
      token?.dispose();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    /** An automatically approved withdrawal of 0.1 ETH from `accountId`. */
    async function approved(accountId: string): Promise<Operation> {
      const withdrawalId = `wd-${randomBytes(6).toString('hex')}`;
      const op = await inTenant(async (tx) => {
        const created = await createWithdrawal(tx, {
          tenantId,
          request: {
            withdrawalId,
            accountId,
            asset: 'ETH',
            destination: getAddress(`0x${randomBytes(20).toString('hex')}`),
            amountMinor: (ETH / 10n).toString(),
          },
          idempotencyKey: `withdrawal-${withdrawalId}`,
        });
        return reviewWithdrawal(tx, created.operation);
      });
      expect(op.state).toBe('APPROVED');
      return op;
    }

    /** The attacker's claim: SIGNING, leased to them, with no claim statement (and no freeze check) run. */
    async function claimBehindTheClaim(op: Operation): Promise<void> {
      await asOwnerWithoutGuards(async (tx) => {
        await tx.execute(sql`update operations set state = 'SIGNING', lease_owner = 'mallory',
            lease_expires_at = now() + interval '5 minutes', lease_generation = lease_generation + 1
          where tenant_id = ${tenantId}::uuid and operation_id = ${op.operationId}::uuid`);
      });
    }

    /** The withdrawal recorded as sent at `nonce`, as the worker records it after broadcasting. */
    async function markBroadcast(op: Operation, nonce: number): Promise<void> {
      await asOwnerWithoutGuards(async (tx) => {
        await tx.execute(sql`update operations set state = 'BROADCAST', chain_nonce = ${nonce},
            signed_artifact = '0x02', tx_hash = ${`0x${'cd'.repeat(32)}`}
          where tenant_id = ${tenantId}::uuid and operation_id = ${op.operationId}::uuid`);
      });
    }

    async function ask(
      op: Operation,
      kind: 'payment' | 'replacement' | 'cancel',
      nonce?: number,
    ): Promise<{ status: number; code?: string; message?: string }> {
      const wallet = await inTenant((tx) => getHotWallet(tx, tenantId, 'ethereum'));
      const transaction = serializeTransaction({
        type: 'eip1559',
        chainId: CHAIN_ID,
        nonce: nonce ?? wallet.nextNonce,
        gas: 21_000n,
        maxFeePerGas: kind === 'payment' ? 3_000_000_000n : 6_000_000_000n,
        maxPriorityFeePerGas: kind === 'payment' ? 1_000_000_000n : 2_000_000_000n,
        // A cancel pays nothing to the wallet itself; a payment or a fee bump pays the approval.
        ...(kind === 'cancel'
          ? { to: walletAddress, value: 0n }
          : { to: op.destination as Hex, value: BigInt(op.amountMinor) }),
      });
      const response = await fetch(`${signerUrl}/v1/sign`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${workerToken}` },
        body: JSON.stringify({ tenantId, operationId: op.operationId, kind, transaction }),
      });
      const json = (await response.json()) as {
        signature?: unknown;
        error?: { code: string; message: string };
      };
      // No worker here: move the wallet on as the worker's claim would, so the next nonce is free.
      if (json.signature && kind === 'payment') {
        await t.db.execute(sql`update hot_wallets set next_nonce = next_nonce + 1
          where tenant_id = ${tenantId}::uuid and network = 'ethereum'`);
      }
      return { status: response.status, code: json.error?.code, message: json.error?.message };
    }

    const logLines = (): SignerLogLine[] =>
      readFileSync(logPath, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as SignerLogLine);

    it('I33-FREEZE a frozen account’s withdrawal, claimed behind the claim by the database owner, is refused (FROZEN, logged); another account’s is signed', async () => {
      // Sent before the freeze: a fee bump and a cancel of it are asked below.
      const sent = await approved('acct-frozen');
      const nonce = (await inTenant((tx) => getHotWallet(tx, tenantId, 'ethereum'))).nextNonce;
      expect(await ask(sent, 'payment')).toMatchObject({ status: 200 });
      await markBroadcast(sent, nonce);

      const held = await approved('acct-frozen');
      const frozen = await inTenant((tx) =>
        freeze(tx, {
          tenantId,
          actor: operator,
          request: { scope: 'account', accountRef: 'acct-frozen', reason: 'incident 42: account taken over' },
        }),
      );
      await claimBehindTheClaim(held);
      const refused = await ask(held, 'payment');
      expect(refused).toMatchObject({ status: 423, code: 'FROZEN' });
      expect(refused.message).toContain(frozen.freezeId);
      const line = logLines().at(-1);
      expect(line).toMatchObject({
        outcome: 'refused',
        operationId: held.operationId,
        kind: 'payment',
        code: 'FROZEN',
      });

      // Settling what is on chain goes on: the fee bump and the cancel of the sent one are signed.
      expect(await ask(sent, 'replacement', nonce)).toMatchObject({ status: 200 });
      expect(await ask(sent, 'cancel', nonce)).toMatchObject({ status: 200 });
      expect(logLines().slice(-2)).toMatchObject([
        { outcome: 'signed', operationId: sent.operationId, kind: 'replacement', nonce },
        { outcome: 'signed', operationId: sent.operationId, kind: 'cancel', nonce },
      ]);

      // The freeze holds its account only.
      expect(await ask(await approved('acct-free'), 'payment')).toMatchObject({ status: 200 });
    });

    it('I33-FREEZE an asset freeze refuses every account’s payment in it; once lifted, the same payment is signed', async () => {
      const op = await approved('acct-free');
      const frozen = await inTenant((tx) =>
        freeze(tx, {
          tenantId,
          actor: operator,
          request: { scope: 'asset', assetCode: 'ETH', reason: 'ETH incident' },
        }),
      );
      expect(await ask(op, 'payment')).toMatchObject({ status: 423, code: 'FROZEN' });
      // A freeze lifted (as the governance step records it) holds nothing any more.
      await asOwnerWithoutGuards(async (tx) => {
        await tx.execute(sql`update freezes set lifted_at = now(), lifted_by = 'governance',
            lift_proposal_id = ${crypto.randomUUID()}::uuid
          where tenant_id = ${tenantId}::uuid and freeze_id = ${frozen.freezeId}::uuid`);
      });
      expect(await ask(op, 'payment')).toMatchObject({ status: 200 });
    });

    it('I33-FREEZE a freeze placed while the worker is signing: the signer refuses it (FROZEN), nothing is kept, and the worker logs the hold, not an alert', async () => {
      const anvil: AnvilInstance = await startAnvil({ chainId: CHAIN_ID, mining: 'auto' });
      const lines: { level: number; alert?: boolean; operationId?: string; msg: string }[] = [];
      try {
        await creditAsOperator(t.db, {
          tenantId,
          deposit: {
            reference: 'seed-acct-race',
            accountId: 'acct-race',
            asset: 'ETH',
            amountMinor: ETH.toString(),
          },
          idempotencyKey: 'seed-acct-race',
          actor: 'test',
        });
        const op = await approved('acct-race');
        const worker = createWorker({
          db: t.db,
          rails: new RailRegistry({
            evm: { rpcUrl: anvil.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 5_000, signTimeoutMs: 30_000 },
            signerService: { url: signerUrl, token: workerToken },
          }),
          log: pino(
            { level: 'info' },
            { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) },
          ),
          workerId: 'worker-a',
          leaseMs: 30_000,
          // The race: the freeze commits after the worker's claim and before the signer reads it.
          probe: async (step, operationId) => {
            if (step !== 'signing' || operationId !== op.operationId) return;
            await inTenant((tx) =>
              freeze(tx, {
                tenantId,
                actor: operator,
                request: {
                  scope: 'account',
                  accountRef: 'acct-race',
                  reason: 'incident 43: raced the claim',
                },
              }),
            );
          },
        });
        await worker.runOnce();
        const after = await inTenant(async (tx) =>
          rowsOf<{ state: string; signed_artifact: string | null }>(
            await tx.execute(sql`select state, signed_artifact from operations
              where tenant_id = ${tenantId}::uuid and operation_id = ${op.operationId}::uuid`),
          ),
        );
        expect(after).toEqual([{ state: 'APPROVED', signed_artifact: null }]);
        expect(
          logLines()
            .filter((l) => l.operationId === op.operationId)
            .map((l) => l.code),
        ).toEqual(['FROZEN']);
        const mine = lines.filter((l) => l.operationId === op.operationId);
        expect(mine.filter((l) => l.alert === true)).toEqual([]);
        expect(mine).toContainEqual(
          expect.objectContaining({ level: 40, msg: expect.stringMatching(/held by a freeze/) }),
        );
        // The next pass does not claim it while the freeze is in force: nothing more is asked.
        await worker.runOnce();
        expect(logLines().filter((l) => l.operationId === op.operationId)).toHaveLength(1);
      } finally {
        await anvil.stop();
      }
    });

    it('I33-FREEZE a tenant freeze refuses the payment too', async () => {
      const op = await approved('acct-free');
      await inTenant((tx) =>
        freeze(tx, {
          tenantId,
          actor: operator,
          request: { scope: 'tenant', reason: 'tenant-wide incident' },
        }),
      );
      const answer = await ask(op, 'payment');
      expect(answer).toMatchObject({ status: 423, code: 'FROZEN' });
      expect(answer.message).toContain('tenant');
    });
  },
);
