/**
 * I32-TRUST: the signer service believes an approval only along its own chain of trust
 * (docs/SIGNING.md "Chain of trust"). Its trust file, written by `idem signer pin` at bootstrap,
 * pins the tenant's first admin's passkey and its auto-approve limit. An attacker who can write
 * every table (here: the owner's login with triggers off, more than the application's login can)
 * forges decision rows, an active passkey of their own, a looser risk rule, or swaps an anchor's
 * public key: the service refuses each, and signs a withdrawal approved on a trusted device. Every
 * test here was seen failing first (the service signed what the database said was APPROVED).
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  applyDueControlChanges,
  approvalChallenge,
  createTenant,
  createWithdrawal,
  creditAsOperator,
  decideProposal,
  decideWithdrawal,
  getHotWallet,
  getProposal,
  type Operation,
  proposalChallenge,
  provisionHotWallet,
  registerPasskey,
  registrationChallenge,
  relyingPartyOf,
  reviewWithdrawal,
  rowsOf,
  setTenantGovernance,
  withTenant,
} from '@idem/core';
import { ETH } from '@idem/testing/chain';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { SoftPasskey } from '@idem/testing/passkeys';
import { initSoftHsmToken, type SoftHsmToken, softHsmModulePath, tokenKey } from '@idem/testing/signer';
import { provisionRiskPolicy, staffMember } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { getAddress, type Hex, serializeTransaction } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSignerProcess, stopSignerProcess } from '../scripts/signer-process.ts';
import { idem } from './support/cli-process.ts';
import { createSignerLogin, type SignerLogin, signerServiceEnv } from './support/signer-service.ts';

const CHAIN_ID = 31337;
const ORIGIN = 'https://staff.idem.test';
const rp = relyingPartyOf(ORIGIN);
const SESSION = 'signer-trust-session';

describe.skipIf(!onPostgres || !softHsmModulePath())(
  'I32-TRUST the signer believes approvals only along its chain of trust (own process, SoftHSM2, real PostgreSQL)',
  () => {
    let token: SoftHsmToken;
    let t: TestDatabase;
    let tenantId: string;
    let dir: string;
    let signer: ChildProcess | undefined;
    let signerUrl: string;
    let trustFile: string;
    let signerEnv: Record<string, string>;
    const workerToken = randomBytes(24).toString('hex');
    let login: SignerLogin | undefined;
    /** The first admin, whose passkey is the pinned anchor. */
    let anchorAdmin: string;
    let anchorKey: SoftPasskey;
    let secondAdmin: string;
    let approver: string;

    const userIdOf = (actor: string) => actor.replace(/^staff:/, '');
    const inTenant = <T>(work: Parameters<typeof withTenant<T>>[2]) => withTenant(t.db, tenantId, work);

    /** Writes as someone holding every table: the owner's login, the database's own guards off. */
    const asOwnerWithoutGuards = (
      work: (tx: Parameters<Parameters<typeof t.db.transaction>[0]>[0]) => Promise<void>,
    ) =>
      t.db.transaction(async (tx) => {
        await tx.execute(sql`set local session_replication_role = replica`);
        await work(tx);
      });

    function register(member: string, key: SoftPasskey) {
      const userId = userIdOf(member);
      return inTenant((tx) =>
        registerPasskey(tx, {
          tenantId,
          userId,
          label: 'laptop',
          registration: key.register(registrationChallenge(userId, SESSION)),
          rp,
          sessionSecret: SESSION,
        }),
      );
    }

    beforeAll(async () => {
      token = initSoftHsmToken();
      const key = await tokenKey(token, 'hot-wallet-ethereum');
      t = await createTestDatabase({ maxConnections: 6 });
      ({ tenantId } = await createTenant(t.db, {
        name: 'Trusting Exchange',
        assets: [{ code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 1 }],
      }));
      await provisionHotWallet(t.db, {
        tenantId,
        network: 'ethereum',
        address: key.address,
        keyRef: key.keyRef,
      });
      await creditAsOperator(t.db, {
        tenantId,
        deposit: {
          reference: 'seed',
          accountId: 'acct-1',
          asset: 'ETH',
          amountMinor: (500n * ETH).toString(),
        },
        idempotencyKey: 'seed',
        actor: 'test',
      });
      await provisionRiskPolicy(t.db, {
        tenantId,
        assetCode: 'ETH',
        autoApproveMaxMinor: ETH.toString(),
        fourEyesMinMinor: (100n * ETH).toString(),
        velocityMaxPerHour: 1000,
      });
      await setTenantGovernance(t.db, { tenantId, looseningDelaySeconds: 0 });
      // Bootstrap: the one admin registers the tenant's first passkey (the anchor), then the
      // operator pins it, with the auto-approve limit, in the signer's trust file.
      anchorAdmin = await staffMember(t.db, tenantId, 'admin');
      anchorKey = new SoftPasskey(ORIGIN);
      expect((await register(anchorAdmin, anchorKey)).outcome).toBe('APPLIED');
      dir = mkdtempSync(join(tmpdir(), 'idem-signer-trust-'));
      trustFile = join(dir, 'trust.json');
      const pinned = await idem(
        { DATABASE_URL: t.url ?? '' },
        ...['signer', 'pin', '--tenant', tenantId, '--origin', ORIGIN, '--file', trustFile, '--json'],
      );
      expect(pinned.code, pinned.stderr).toBe(0);
      expect(JSON.parse(readFileSync(trustFile, 'utf8'))).toMatchObject({
        origins: [ORIGIN],
        tenants: {
          [tenantId]: {
            anchors: [{ credentialId: anchorKey.id, userId: userIdOf(anchorAdmin) }],
            autoApproveMaxMinor: { ETH: ETH.toString() },
            minApprovals: 1,
          },
        },
      });
      secondAdmin = await staffMember(t.db, tenantId, 'admin');
      approver = await staffMember(t.db, tenantId, 'approver');

      login = await createSignerLogin(t, 'idem_signer_trust');
      signerEnv = signerServiceEnv({
        token,
        workerToken,
        login,
        chainId: CHAIN_ID,
        logPath: join(dir, 'signer-log.jsonl'),
        trustFile,
      });
      ({ child: signer, url: signerUrl } = await startSignerProcess(signerEnv));
    });
    afterAll(async () => {
      await stopSignerProcess(signer);
      await t?.dispose();
      await login?.drop();
      token?.dispose();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    /** A withdrawal of `amount` from the seeded account, through the risk review. */
    async function reviewed(amount: bigint, tenant = tenantId): Promise<Operation> {
      const withdrawalId = `wd-${randomBytes(6).toString('hex')}`;
      return withTenant(t.db, tenant, async (tx) => {
        const created = await createWithdrawal(tx, {
          tenantId: tenant,
          request: {
            withdrawalId,
            accountId: 'acct-1',
            asset: 'ETH',
            destination: getAddress(`0x${randomBytes(20).toString('hex')}`),
            amountMinor: amount.toString(),
          },
          idempotencyKey: `withdrawal-${withdrawalId}`,
        });
        return reviewWithdrawal(tx, created.operation);
      });
    }

    /** Marks the withdrawal APPROVED with decision rows of the attacker's making. */
    async function forgeApproval(op: Operation, decisions: { approver: string; assertion: unknown }[]) {
      await asOwnerWithoutGuards(async (tx) => {
        for (const decision of decisions) {
          await tx.execute(sql`insert into approvals (tenant_id, operation_id, approver, payload_hash, decision, passkey_assertion)
            values (${tenantId}::uuid, ${op.operationId}::uuid, ${decision.approver}, ${op.payloadHash}, 'approve',
                    ${decision.assertion === null ? null : JSON.stringify(decision.assertion)}::jsonb)`);
        }
        await tx.execute(sql`update operations set state = 'APPROVED'
          where tenant_id = ${tenantId}::uuid and operation_id = ${op.operationId}::uuid`);
      });
    }

    /** What an approval row stores of an assertion (core StoredAssertion). */
    function stored(key: SoftPasskey, challenge: string) {
      const assertion = key.assert(challenge);
      return {
        credentialId: assertion.id,
        authenticatorData: assertion.response.authenticatorData,
        clientDataJSON: assertion.response.clientDataJSON,
        signature: assertion.response.signature,
        userHandle: assertion.response.userHandle ?? null,
        counter: 0,
      };
    }

    async function askToPay(
      op: Operation,
      kind: 'payment' | 'replacement' = 'payment',
      nonce?: number,
    ): Promise<{ status: number; code?: string; message?: string }> {
      const wallet = await withTenant(t.db, op.tenantId, (tx) => getHotWallet(tx, op.tenantId, 'ethereum'));
      const transaction = serializeTransaction({
        type: 'eip1559',
        chainId: CHAIN_ID,
        nonce: nonce ?? wallet.nextNonce,
        gas: 21_000n,
        maxFeePerGas: 3_000_000_000n,
        maxPriorityFeePerGas: 1_000_000_000n,
        to: op.destination as Hex,
        value: BigInt(op.amountMinor),
      });
      const response = await fetch(`${signerUrl}/v1/sign`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${workerToken}` },
        body: JSON.stringify({
          tenantId: op.tenantId,
          operationId: op.operationId,
          kind,
          transaction,
        }),
      });
      const json = (await response.json()) as {
        signature?: unknown;
        error?: { code: string; message: string };
      };
      // No worker here: move the wallet on as the worker's claim would, so the next test's nonce is free.
      if (json.signature) {
        await t.db.execute(sql`update hot_wallets set next_nonce = next_nonce + 1
          where tenant_id = ${op.tenantId}::uuid and network = 'ethereum'`);
      }
      return { status: response.status, code: json.error?.code, message: json.error?.message };
    }

    it('I32-TRUST a withdrawal above the pinned auto-approve limit, APPROVED by a forged decision row without an assertion, is refused', async () => {
      const op = await reviewed(5n * ETH);
      expect(op.state).toBe('REQUESTED');
      await forgeApproval(op, [{ approver: secondAdmin, assertion: null }]);
      const answer = await askToPay(op);
      expect(answer).toMatchObject({ status: 403, code: 'FORBIDDEN' });
      expect(answer.message).toContain('0 of 1 approvals');
    });

    it('I32-TRUST the same withdrawal approved on the anchor admin’s own device is signed', async () => {
      const op = await reviewed(5n * ETH);
      const decided = await inTenant((tx) =>
        decideWithdrawal(tx, {
          tenantId,
          operationId: op.operationId,
          staffId: anchorAdmin,
          payloadHash: op.payloadHash,
          decision: 'approve',
          assertion: anchorKey.assert(approvalChallenge(op.operationId, op.payloadHash, 'approve')),
          relyingParty: rp,
        }),
      );
      expect(decided.operation.state).toBe('APPROVED');
      expect(await askToPay(decided.operation)).toMatchObject({ status: 200 });
    });

    it('I32-TRUST an assertion by a passkey the attacker activated in the database (no approved registration) is refused', async () => {
      // Registered as the app would (stored inactive, its activation proposed), then switched on in
      // the database without the proposal ever being approved.
      const mallory = new SoftPasskey(ORIGIN);
      expect((await register(approver, mallory)).outcome).toBe('PROPOSED');
      await asOwnerWithoutGuards(async (tx) => {
        await tx.execute(sql`update staff_passkeys set activated_at = now()
          where tenant_id = ${tenantId}::uuid and credential_id = ${mallory.id}`);
      });
      const op = await reviewed(5n * ETH);
      await forgeApproval(op, [
        {
          approver,
          assertion: stored(mallory, approvalChallenge(op.operationId, op.payloadHash, 'approve')),
        },
      ]);
      const answer = await askToPay(op);
      expect(answer).toMatchObject({ status: 403, code: 'FORBIDDEN' });
      expect(answer.message).toContain('passkey not trusted');
    });

    it('I32-TRUST the anchor’s public key swapped in the database for the attacker’s verifies nothing', async () => {
      // The attacker's own key, in the form the table stores (registered for a member of theirs).
      const mallory = new SoftPasskey(ORIGIN);
      const accomplice = await staffMember(t.db, tenantId, 'approver');
      await register(accomplice, mallory);
      const original = await storedPublicKey(anchorKey.id);
      const op = await reviewed(5n * ETH);
      await asOwnerWithoutGuards(async (tx) => {
        await tx.execute(sql`update staff_passkeys set public_key = ${await storedPublicKey(mallory.id)}
          where tenant_id = ${tenantId}::uuid and credential_id = ${anchorKey.id}`);
      });
      try {
        // The attacker's key signs, under the anchor's credential id.
        const forged = stored(mallory, approvalChallenge(op.operationId, op.payloadHash, 'approve'));
        await forgeApproval(op, [
          { approver: anchorAdmin, assertion: { ...forged, credentialId: anchorKey.id } },
        ]);
        const answer = await askToPay(op);
        expect(answer).toMatchObject({ status: 403, code: 'FORBIDDEN' });
        expect(answer.message).toContain('does not verify');
      } finally {
        await asOwnerWithoutGuards(async (tx) => {
          await tx.execute(sql`update staff_passkeys set public_key = ${original}
            where tenant_id = ${tenantId}::uuid and credential_id = ${anchorKey.id}`);
        });
      }
    });

    it('I32-TRUST a "fee bump" of a withdrawal the attacker marked as sent, never approved by anyone, is refused', async () => {
      const op = await reviewed(5n * ETH);
      // A recorded attempt of their making: the fee-bump path checks the attempt, and now the approval.
      await asOwnerWithoutGuards(async (tx) => {
        await tx.execute(sql`update operations set state = 'BROADCAST', chain_nonce = 4242,
            signed_artifact = '0x02', tx_hash = ${`0x${'ab'.repeat(32)}`}
          where tenant_id = ${tenantId}::uuid and operation_id = ${op.operationId}::uuid`);
      });
      const answer = await askToPay(op, 'replacement', 4242);
      expect(answer).toMatchObject({ status: 403, code: 'FORBIDDEN' });
      expect(answer.message).toContain('0 of 1 approvals');
    });

    it('I32-TRUST a risk rule loosened in the database does not widen what the signer signs without people', async () => {
      await asOwnerWithoutGuards(async (tx) => {
        await tx.execute(sql`update risk_policies set auto_approve_max_minor = ${(50n * ETH).toString()}
          where tenant_id = ${tenantId}::uuid and asset_code = 'ETH'`);
      });
      try {
        const op = await reviewed(20n * ETH);
        expect(op.state).toBe('APPROVED');
        const answer = await askToPay(op);
        expect(answer).toMatchObject({ status: 403, code: 'FORBIDDEN' });
        expect(answer.message).toContain('above the pinned auto-approve limit');
      } finally {
        await asOwnerWithoutGuards(async (tx) => {
          await tx.execute(sql`update risk_policies set auto_approve_max_minor = ${ETH.toString()}
            where tenant_id = ${tenantId}::uuid and asset_code = 'ETH'`);
        });
      }
    });

    it('I32-TRUST a passkey activated by a registration the anchor approved on their device is trusted; its approval is signed', async () => {
      const approverKey = new SoftPasskey(ORIGIN);
      const registered = await register(approver, approverKey);
      expect(registered.outcome).toBe('PROPOSED');
      const proposal = await inTenant((tx) => getProposal(tx, tenantId, registered.proposalId ?? ''));
      await inTenant((tx) =>
        decideProposal(tx, {
          tenantId,
          proposalId: proposal.proposalId,
          staffId: anchorAdmin,
          payloadHash: proposal.payloadHash,
          decision: 'approve',
          assertion: anchorKey.assert(
            proposalChallenge(proposal.proposalId, proposal.payloadHash, 'approve'),
          ),
          relyingParty: rp,
        }),
      );
      expect((await inTenant((tx) => applyDueControlChanges(tx, tenantId))).applied).toBe(1);

      const op = await reviewed(5n * ETH);
      const decided = await inTenant((tx) =>
        decideWithdrawal(tx, {
          tenantId,
          operationId: op.operationId,
          staffId: approver,
          payloadHash: op.payloadHash,
          decision: 'approve',
          assertion: approverKey.assert(approvalChallenge(op.operationId, op.payloadHash, 'approve')),
          relyingParty: rp,
        }),
      );
      expect(decided.operation.state).toBe('APPROVED');
      expect(await askToPay(decided.operation)).toMatchObject({ status: 200 });
    });

    it('I32-TRUST a tenant the trust file does not pin gets nothing signed, even within its own auto-approve rule', async () => {
      const { tenantId: other } = await createTenant(t.db, {
        name: 'Unpinned Exchange',
        assets: [{ code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 1 }],
      });
      const key = await tokenKey(token, 'hot-wallet-unpinned');
      await provisionHotWallet(t.db, {
        tenantId: other,
        network: 'ethereum',
        address: key.address,
        keyRef: key.keyRef,
      });
      await creditAsOperator(t.db, {
        tenantId: other,
        deposit: { reference: 'seed', accountId: 'acct-1', asset: 'ETH', amountMinor: (5n * ETH).toString() },
        idempotencyKey: 'seed',
        actor: 'test',
      });
      await provisionRiskPolicy(t.db, {
        tenantId: other,
        assetCode: 'ETH',
        autoApproveMaxMinor: ETH.toString(),
        fourEyesMinMinor: (100n * ETH).toString(),
      });
      const op = await reviewed(ETH / 10n, other);
      expect(op.state).toBe('APPROVED');
      const answer = await askToPay(op);
      expect(answer).toMatchObject({ status: 403, code: 'FORBIDDEN' });
      expect(answer.message).toContain('not pinned');
    });

    it('I32-TRUST the service does not start without its trust file', async () => {
      const run = await idem({ ...signerEnv, IDEM_SIGNER_TRUST_FILE: '' }, 'signer');
      expect(run.code).not.toBe(0);
      expect(run.stdout + run.stderr).toContain('IDEM_SIGNER_TRUST_FILE');
      expect(run.stdout).not.toContain('signer-started');
    });

    async function storedPublicKey(credentialId: string): Promise<string> {
      const [row] = rowsOf<{ public_key: string }>(
        await t.db.execute(sql`select public_key from staff_passkeys
          where tenant_id = ${tenantId}::uuid and credential_id = ${credentialId}`),
      );
      if (!row) throw new Error(`no passkey ${credentialId}`);
      return row.public_key;
    }
  },
);
