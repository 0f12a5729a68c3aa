/**
 * I32-SIGNER: a stolen worker host cannot pay out. The signer service (`idem signer`) runs as its
 * own process with a SoftHSM2 token, a real PostgreSQL and a real anvil; it alone holds the PIN.
 * Workers send it unsigned transactions with their own credential; it reads the approval from the
 * database itself and signs only what the approval covers. Every test here was seen failing first
 * (the service signed whatever it was sent, or did not exist).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  finishRun,
  getHotWallet,
  getOperation,
  type Operation,
  openDatabase,
  provisionHotWallet,
  reviewWithdrawal,
  rowsOf,
  schema,
  startRun,
  withTenant,
} from '@idem/core';
import { type AnvilInstance, startAnvil } from '@idem/rails';
import { ETH, rpc } from '@idem/testing/chain';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { initSoftHsmToken, type SoftHsmToken, softHsmModulePath, tokenKey } from '@idem/testing/signer';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { createWorker, RailRegistry, signerFor, signRunReport, verifyRunReport } from '@idem/workers';
import { eq, sql } from 'drizzle-orm';
import pino from 'pino';
import {
  createPublicClient,
  getAddress,
  type Hex,
  http,
  keccak256,
  recoverAddress,
  serializeTransaction,
  type TransactionSerializableEIP1559,
} from 'viem';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CLI_BUNDLE } from '../scripts/bundle.ts';
import { type SignerProcess, startSignerProcess } from '../scripts/signer-process.ts';
import { pinTenant, tenantTrustAtBootstrap } from '../src/signer-service/trust-file.ts';
import { createSignerLogin, type SignerLogin, signerServiceEnv } from './support/signer-service.ts';

const serverRoot = fileURLToPath(new URL('../', import.meta.url));
const CHAIN_ID = 31337;

interface Answer {
  signature?: { r: Hex; s: Hex; yParity: 0 | 1 };
  error?: { code: string };
}

/** Runs a CLI process to its end (or until `stopWhen` says so), with only PATH and `env`. */
function runCli(
  env: Record<string, string>,
  args: string[],
  timeoutMs = 60_000,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI_BUNDLE, ...args], {
      cwd: serverRoot,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`idem ${args.join(' ')} did not exit: ${output}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

describe.skipIf(!onPostgres || !softHsmModulePath())(
  'I32-SIGNER the signer service (own process, SoftHSM2, real PostgreSQL, real anvil)',
  () => {
    let token: SoftHsmToken;
    let t: TestDatabase;
    let anvil: AnvilInstance;
    let tenantId: string;
    let wallet: Hex;
    let keyRef: string;
    let dir: string;
    let logPath: string;
    let signer: SignerProcess;
    const workerToken = randomBytes(24).toString('hex');
    let signerEnv: Record<string, string>;
    /** The service's own login: a member of the read-only role idem_signer. */
    let login: SignerLogin | undefined;

    beforeAll(async () => {
      token = initSoftHsmToken();
      const key = await tokenKey(token, 'hot-wallet-ethereum');
      wallet = key.address;
      keyRef = key.keyRef;
      anvil = await startAnvil({ chainId: CHAIN_ID, mining: 'auto' });
      await rpc(anvil.rpcUrl, 'anvil_setBalance', [wallet, `0x${(100n * ETH).toString(16)}`]);
      t = await createTestDatabase({ maxConnections: 6 });
      ({ tenantId } = await createTenant(t.db, {
        name: 'Signer Exchange',
        assets: [{ code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 1 }],
      }));
      await provisionHotWallet(t.db, { tenantId, network: 'ethereum', address: wallet, keyRef: key.keyRef });
      await creditAsOperator(t.db, {
        tenantId,
        deposit: {
          reference: 'seed',
          accountId: 'acct-1',
          asset: 'ETH',
          amountMinor: (50n * ETH).toString(),
        },
        idempotencyKey: 'seed',
        actor: 'test',
      });
      await provisionRiskPolicy(t.db, {
        tenantId,
        assetCode: 'ETH',
        autoApproveMaxMinor: (10n * ETH).toString(),
        fourEyesMinMinor: (100n * ETH).toString(),
        actor: 'test',
      });
      login = await createSignerLogin(t, 'idem_signer_test');
      dir = mkdtempSync(join(tmpdir(), 'idem-signer-'));
      logPath = join(dir, 'signer-log.jsonl');
      // Bootstrap: every withdrawal here is approved by the automatic review, within 10 ETH.
      const trustFile = join(dir, 'trust.json');
      const trust = await withTenant(t.db, tenantId, (tx) => tenantTrustAtBootstrap(tx, tenantId));
      pinTenant(trustFile, { tenantId, origin: 'http://localhost', trust }, null);
      signerEnv = signerServiceEnv({
        token,
        workerToken,
        login,
        chainId: CHAIN_ID,
        logPath,
        trustFile,
        more: { IDEM_SIGNER_REPORT_KEY_FILE: join(dir, 'report-key.pem') },
      });
      signer = await startSignerProcess(signerEnv);
    });
    afterAll(async () => {
      await stop(signer?.child);
      await t?.dispose();
      await login?.drop();
      await anvil?.stop();
      token?.dispose();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    /** A withdrawal of the seeded account, reviewed: APPROVED by the automatic review. */
    async function approvedWithdrawal(amount: bigint): Promise<Operation> {
      const withdrawalId = `wd-${randomBytes(6).toString('hex')}`;
      return withTenant(t.db, tenantId, async (tx) => {
        const created = await createWithdrawal(tx, {
          tenantId,
          request: {
            withdrawalId,
            accountId: 'acct-1',
            asset: 'ETH',
            destination: getAddress(`0x${randomBytes(20).toString('hex')}`),
            amountMinor: amount.toString(),
          },
          idempotencyKey: `withdrawal-${withdrawalId}`,
        });
        const reviewed = await reviewWithdrawal(tx, created.operation);
        expect(reviewed.state).toBe('APPROVED');
        return reviewed;
      });
    }

    const operation = (id: string) => withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, id));
    const nextNonce = async () =>
      (await withTenant(t.db, tenantId, (tx) => getHotWallet(tx, tenantId, 'ethereum'))).nextNonce;

    function unsigned(overrides: Partial<TransactionSerializableEIP1559>): Hex {
      return serializeTransaction({
        type: 'eip1559',
        chainId: CHAIN_ID,
        gas: 21_000n,
        maxFeePerGas: 3_000_000_000n,
        maxPriorityFeePerGas: 1_000_000_000n,
        value: 0n,
        ...overrides,
      });
    }

    async function ask(
      body: { operationId: string; kind: string; transaction: Hex },
      credential: string | null = workerToken,
    ): Promise<{ status: number; json: Answer }> {
      const response = await fetch(`${signer.url}/v1/sign`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(credential ? { authorization: `Bearer ${credential}` } : {}),
        },
        body: JSON.stringify({ tenantId, ...body }),
      });
      return { status: response.status, json: (await response.json()) as Answer };
    }

    it('I32-SIGNER a PKCS#11 module path that is not in the allowlist: the service refuses to start', async () => {
      const run = await runCli({ ...signerEnv, IDEM_SIGNER_PKCS11_MODULE: join(dir, 'evil.so') }, ['signer']);
      expect(run.code).not.toBe(0);
      expect(run.output).toContain('is not in the allowlist IDEM_SIGNER_PKCS11_MODULES');
      expect(run.output).not.toContain('signer-started');
    });

    it('I32-SIGNER a worker without its credential is refused (401 UNAUTHORIZED); a worker started without IDEM_SIGNER_TOKEN does not start', async () => {
      const op = await approvedWithdrawal(ETH / 100n);
      const transaction = unsigned({
        nonce: await nextNonce(),
        to: op.destination as Hex,
        value: BigInt(op.amountMinor),
      });
      const none = await ask({ operationId: op.operationId, kind: 'payment', transaction }, null);
      expect(none.status).toBe(401);
      expect(none.json.error?.code).toBe('UNAUTHORIZED');
      const wrong = await ask(
        { operationId: op.operationId, kind: 'payment', transaction },
        randomBytes(24).toString('hex'),
      );
      expect(wrong.status).toBe(401);
      expect(wrong.json.signature).toBeUndefined();

      const worker = await runCli(
        {
          DATABASE_URL: t.url ?? '',
          IDEM_EVM_RPC_URL: anvil.rpcUrl,
          IDEM_EVM_CHAIN_ID: String(CHAIN_ID),
          IDEM_SIGNER_URL: signer.url,
        },
        ['worker', '--id', 'no-credential'],
      );
      expect(worker.code).not.toBe(0);
      expect(worker.output).toContain('IDEM_SIGNER_TOKEN');
    });

    it('I32-SIGNER a worker with no PIN and no PKCS#11 configuration still sends: the service signs', async () => {
      const op = await approvedWithdrawal(ETH / 4n);
      const worker = spawn(process.execPath, [CLI_BUNDLE, 'worker', '--id', 'no-pin'], {
        cwd: serverRoot,
        // No SOFTHSM2_CONF, no PIN variable: only the service's URL and this worker's credential.
        env: {
          PATH: process.env.PATH ?? '',
          DATABASE_URL: t.url ?? '',
          IDEM_EVM_RPC_URL: anvil.rpcUrl,
          IDEM_EVM_CHAIN_ID: String(CHAIN_ID),
          IDEM_SIGNER_URL: signer.url,
          IDEM_SIGNER_TOKEN: workerToken,
          IDEM_WORKER_INTERVAL_MS: '200',
          LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      worker.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8');
      });
      worker.stderr?.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8');
      });
      try {
        const current = await vi.waitFor(
          async () => {
            const read = await operation(op.operationId);
            expect(read.state, output).toMatch(/BROADCAST|CONFIRMED/);
            return read;
          },
          { timeout: 60_000, interval: 250 },
        );
        const chain = createPublicClient({ transport: http(anvil.rpcUrl) });
        const mined = await chain.waitForTransactionReceipt({ hash: current.txHash as Hex, timeout: 30_000 });
        expect(getAddress(mined.from)).toBe(getAddress(wallet));
        expect(await chain.getBalance({ address: op.destination as Hex })).toBe(ETH / 4n);
      } finally {
        await stop(worker);
      }
      const lines = readFileSync(logPath, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(lines).toContainEqual(
        expect.objectContaining({ outcome: 'signed', worker: 'worker-a', operationId: op.operationId }),
      );
    });

    it('I32-SIGNER on a production chain a worker never opens the HSM itself, even with the PIN in its environment', () => {
      expect(process.env[token.pinVariable]).toBe(token.pin);
      expect(() => signerFor(keyRef, 1)).toThrow(/signer service/);
      // On a development chain (this anvil) the in-process path stays, as before.
      expect(signerFor(keyRef, CHAIN_ID).address).toBe(wallet);
    });

    it('I32-SIGNER a transaction that pays another address or another amount than approved is refused', async () => {
      const op = await approvedWithdrawal(ETH / 50n);
      const nonce = await nextNonce();
      const approved = { nonce, to: op.destination as Hex, value: BigInt(op.amountMinor) };
      const attacker = getAddress(`0x${randomBytes(20).toString('hex')}`);

      const redirected = await ask({
        operationId: op.operationId,
        kind: 'payment',
        transaction: unsigned({ ...approved, to: attacker }),
      });
      expect(redirected.status).toBe(409);
      expect(redirected.json.error?.code).toBe('PAYLOAD_MISMATCH');

      const inflated = await ask({
        operationId: op.operationId,
        kind: 'payment',
        transaction: unsigned({ ...approved, value: approved.value * 10n }),
      });
      expect(inflated.json.error?.code).toBe('PAYLOAD_MISMATCH');

      const tokenCall = await ask({
        operationId: op.operationId,
        kind: 'payment',
        transaction: unsigned({ ...approved, data: '0xa9059cbb' }),
      });
      expect(tokenCall.json.error?.code).toBe('PAYLOAD_MISMATCH');

      const otherChain = await ask({
        operationId: op.operationId,
        kind: 'payment',
        transaction: serializeTransaction({
          type: 'eip1559',
          chainId: 1,
          gas: 21_000n,
          maxFeePerGas: 3_000_000_000n,
          maxPriorityFeePerGas: 1_000_000_000n,
          ...approved,
        }),
      });
      expect(otherChain.json.error?.code).toBe('VALIDATION');

      const overCap = await ask({
        operationId: op.operationId,
        kind: 'payment',
        transaction: unsigned({ ...approved, maxFeePerGas: 10n ** 15n }),
      });
      expect(overCap.json.error?.code).toBe('VALIDATION');

      // The approved transfer itself is signed, by the hot wallet's key.
      const transaction = unsigned(approved);
      const good = await ask({ operationId: op.operationId, kind: 'payment', transaction });
      expect(good.status).toBe(200);
      const signature = good.json.signature as { r: Hex; s: Hex; yParity: 0 | 1 };
      expect(getAddress(await recoverAddress({ hash: keccak256(transaction), signature }))).toBe(
        getAddress(wallet),
      );
    });

    it('I32-SIGNER a second signature for a used nonce is refused, unless a fee bump or cancel of that same operation', async () => {
      // A nonce already used by a sent withdrawal (the one the worker sent above).
      const sent =
        (await withTenant(t.db, tenantId, (tx) => getHotWallet(tx, tenantId, 'ethereum'))).nextNonce - 1;
      const op = await approvedWithdrawal(ETH / 20n);
      const payment = { to: op.destination as Hex, value: BigInt(op.amountMinor) };
      const reused = await ask({
        operationId: op.operationId,
        kind: 'payment',
        transaction: unsigned({ ...payment, nonce: sent }),
      });
      expect(reused.status).toBe(409);
      expect(reused.json.error?.code).toBe('STALE_WRITE');

      // The next nonce, already signed (above) for another approved withdrawal: refused too.
      const taken = await ask({
        operationId: op.operationId,
        kind: 'payment',
        transaction: unsigned({ ...payment, nonce: await nextNonce() }),
      });
      expect(taken.status).toBe(409);
      expect(taken.json.error?.code).toBe('IDEMPOTENCY_CONFLICT');

      // Calling it a fee bump or a cancel does not help: nothing of this operation was sent.
      for (const kind of ['replacement', 'cancel']) {
        const disguised = await ask({
          operationId: op.operationId,
          kind,
          transaction: unsigned({ ...payment, nonce: sent }),
        });
        expect(disguised.json.error?.code).toBe('INVALID_TRANSITION');
      }

      // A fee bump of the sent withdrawal itself is signed (same nonce, same operation)...
      const [broadcast] = await withTenant(t.db, tenantId, (tx) =>
        tx
          .select({ operationId: schema.operations.operationId })
          .from(schema.operations)
          .where(eq(schema.operations.chainNonce, sent)),
      );
      const sentOp = await operation(broadcast?.operationId ?? '');
      const bump = await ask({
        operationId: sentOp.operationId,
        kind: 'replacement',
        transaction: unsigned({
          nonce: sent,
          to: sentOp.destination as Hex,
          value: BigInt(sentOp.amountMinor),
          maxFeePerGas: 6_000_000_000n,
          maxPriorityFeePerGas: 2_000_000_000n,
        }),
      });
      if (sentOp.state === 'BROADCAST' || sentOp.state === 'UNKNOWN') {
        expect(bump.status).toBe(200);
        // ...but not a "bump" that pays someone else.
        const redirected = await ask({
          operationId: sentOp.operationId,
          kind: 'replacement',
          transaction: unsigned({
            nonce: sent,
            to: getAddress(`0x${randomBytes(20).toString('hex')}`),
            value: BigInt(sentOp.amountMinor),
            maxFeePerGas: 6_000_000_000n,
            maxPriorityFeePerGas: 2_000_000_000n,
          }),
        });
        expect(redirected.json.error?.code).toBe('PAYLOAD_MISMATCH');
      } else {
        // Confirmed already: nothing left to bump.
        expect(bump.json.error?.code).toBe('INVALID_TRANSITION');
      }
    });

    it('I32-SIGNER the service reads with a login that can write nothing and cannot become the application role', async () => {
      const asSigner = await openDatabase({ url: login?.url ?? '', maxConnections: 1 });
      const refused = async (statement: string) => {
        const error = await asSigner.db.execute(sql.raw(statement)).then(
          () => null,
          (e: unknown) => e as { cause?: { code?: string }; code?: string },
        );
        return error?.cause?.code ?? error?.code ?? null;
      };
      try {
        // 42501: insufficient privilege.
        expect(await refused(`update hot_wallets set next_nonce = 0`)).toBe('42501');
        expect(await refused(`update operations set state = 'APPROVED'`)).toBe('42501');
        expect(await refused(`delete from signed_attempts`)).toBe('42501');
        expect(await refused(`insert into hot_wallets (tenant_id) values ('${tenantId}')`)).toBe('42501');
        expect(await refused(`set role idem_app`)).toBe('42501');
      } finally {
        await asSigner.close();
      }
    });

    it("I32-SIGNER a reconciliation report is signed by the signer service's own Ed25519 key, which the tenant does not hold", async () => {
      const runId = await withTenant(t.db, tenantId, async (tx) => {
        const id = await startRun(tx, { tenantId, ranBy: 'test', trigger: 'on_demand', inputs: {} });
        await finishRun(tx, {
          tenantId,
          runId: id,
          result: 'balanced',
          breaksOpened: 0,
          figures: [
            {
              place: 'chain:ethereum',
              assetCode: 'ETH',
              liabilitiesAvailableMinor: '5',
              liabilitiesHeldMinor: '0',
              custodyControlMinor: '0',
              feeExpenseMinor: '0',
              inFlightWithdrawalsMinor: '0',
              expectedMinor: '5',
              observedMinor: '5',
              explainedMinor: '0',
              unexplainedMinor: '0',
              explanations: [],
              pinnedBlock: 1,
              reportedAt: null,
              accountTenants: 1,
              breakId: null,
            },
          ],
        });
        return id;
      });
      const published = (await (await fetch(`${signer.url}/v1/report-key`)).json()) as { publicKey: string };
      const report = await signRunReport(t.db, tenantId, runId, new Date(), {
        url: signer.url,
        token: workerToken,
      });
      expect(report.format).toBe('idem.reconciliation-run.v2');
      expect(verifyRunReport(JSON.stringify(report), published.publicKey).runId).toBe(runId);

      // An edited run no longer verifies.
      const edited = { ...report, payload: report.payload.replace('"balanced"', '"variance"') };
      expect(() => verifyRunReport(JSON.stringify(edited), published.publicKey)).toThrow(/signature/);
      // Nor one the tenant signs with a key of its own, whatever key id it claims.
      const own = generateKeyPairSync('ed25519');
      const forged = {
        ...edited,
        signature: {
          ...report.signature,
          signature: sign(
            null,
            Buffer.from(`idem.reconciliation-run.v2\n${edited.payload}`),
            own.privateKey,
          ).toString('base64'),
        },
      };
      expect(() => verifyRunReport(JSON.stringify(forged), published.publicKey)).toThrow(/signature/);
      expect(() =>
        verifyRunReport(
          JSON.stringify(forged),
          String(own.publicKey.export({ type: 'spki', format: 'pem' })),
        ),
      ).toThrow(/signature/);

      // The auditor's check, with the published key.
      const files = { report: join(dir, 'report.json'), key: join(dir, 'report-key.json') };
      writeFileSync(files.report, JSON.stringify(report));
      writeFileSync(files.key, JSON.stringify(published));
      const checked = await runCli({}, [
        'reconcile',
        'verify',
        files.report,
        '--public-key',
        files.key,
        '--json',
      ]);
      expect(checked.code, checked.output).toBe(0);
      expect(JSON.parse(checked.output)).toMatchObject({ verified: true, runId });
      // A request without a worker credential signs nothing.
      const anonymous = await fetch(`${signer.url}/v1/sign-report`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ tenantId, runId }),
      });
      expect(anonymous.status).toBe(401);
    });

    it('I32-SIGNER the signer SIGKILLed mid-request: nothing is signed, kept or sent, the withdrawal stays APPROVED, and once the signer is back it is signed and sent once', async () => {
      const op = await approvedWithdrawal(ETH / 10n);
      const nonce = await nextNonce();
      const chain = createPublicClient({ transport: http(anvil.rpcUrl) });
      const pendingBefore = await chain.getTransactionCount({ address: wallet, blockTag: 'pending' });
      const worker = createWorker({
        db: t.db,
        rails: new RailRegistry({
          evm: { rpcUrl: anvil.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000, signTimeoutMs: 60_000 },
          signerService: { url: signer.url, token: workerToken },
        }),
        log: pino({ level: 'silent' }),
        workerId: 'signer-killed',
        leaseMs: 5_000,
      });
      // Hold the signer inside its own read of the approval: a lock on proposals, which it reads for
      // the fee cap in force and the worker does not read while dispatching.
      const holder = await openDatabase({ url: t.url ?? '', maxConnections: 1 });
      let release = () => {};
      const held = new Promise<void>((locked) => {
        void holder.db.transaction(async (tx) => {
          await tx.execute(sql`lock table proposals in access exclusive mode`);
          locked();
          await new Promise<void>((resolve) => {
            release = resolve;
          });
        });
      });
      await held;
      const pass = worker.runOnce();
      try {
        const signerWaitingOnLock = async () => {
          const [waiting] = rowsOf<{ n: number }>(
            await t.db.execute(
              sql`select count(*)::int as n from pg_stat_activity where usename = ${login?.name ?? ''} and wait_event_type = 'Lock'`,
            ),
          );
          return waiting?.n ?? 0;
        };
        await expect
          .poll(signerWaitingOnLock, {
            timeout: 20_000,
            interval: 50,
            message: 'the signer never reached its read of the approval',
          })
          .toBeGreaterThan(0);
        const exited = new Promise((resolve) => signer.child.once('exit', resolve));
        signer.child.kill('SIGKILL');
        await exited;
      } finally {
        release();
        await holder.close();
      }
      await pass;
      const afterKill = await operation(op.operationId);
      expect(afterKill.state).toBe('APPROVED');
      expect(afterKill.signedArtifact).toBeNull();
      expect(await nextNonce()).toBe(nonce);
      expect(await chain.getTransactionCount({ address: wallet, blockTag: 'pending' })).toBe(pendingBefore);

      // Back on the same address, with the same log: the next pass signs and sends it, once.
      signer = await startSignerProcess({ ...signerEnv, IDEM_SIGNER_LISTEN: new URL(signer.url).host });
      await worker.runOnce();
      const sent = await operation(op.operationId);
      expect(sent.state).toMatch(/BROADCAST|CONFIRMED/);
      // (Older approved withdrawals of the earlier tests may take the nonces before it.)
      expect(sent.chainNonce ?? -1).toBeGreaterThanOrEqual(nonce);
      // Every nonce handed out reached the node: none lost (and this withdrawal signed once, below).
      expect(await chain.getTransactionCount({ address: wallet, blockTag: 'pending' })).toBe(
        await nextNonce(),
      );
      const lines = readFileSync(logPath, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { outcome: string; operationId?: string });
      expect(lines.filter((l) => l.operationId === op.operationId && l.outcome === 'signed')).toHaveLength(1);
    });

    it('I32-SIGNER the signer log is hash-chained: it verifies, records signatures and refusals, and an edited line breaks it', async () => {
      const verified = await runCli({}, ['signer', 'verify-log', '--log', logPath, '--json']);
      expect(verified.code).toBe(0);
      expect(JSON.parse(verified.output)).toMatchObject({ ok: true });
      const lines = readFileSync(logPath, 'utf8').trim().split('\n');
      const parsed = lines.map((l) => JSON.parse(l) as { outcome: string; code?: string });
      expect(parsed.filter((l) => l.outcome === 'signed').length).toBeGreaterThanOrEqual(2);
      expect(parsed.map((l) => l.code)).toEqual(
        expect.arrayContaining(['UNAUTHORIZED', 'PAYLOAD_MISMATCH', 'IDEMPOTENCY_CONFLICT', 'STALE_WRITE']),
      );

      // Turn one refusal into something else: the chain breaks at that line.
      const index = parsed.findIndex((l) => l.code === 'PAYLOAD_MISMATCH');
      const forged = [...lines];
      forged[index] = (forged[index] ?? '').replace('"refused"', '"signed"');
      const copy = join(dir, 'forged.jsonl');
      writeFileSync(copy, `${forged.join('\n')}\n`);
      const broken = await runCli({}, ['signer', 'verify-log', '--log', copy, '--json']);
      expect(broken.code).toBe(1);
      expect(JSON.parse(broken.output)).toMatchObject({ ok: false, brokenAt: index + 1 });
    });
  },
);
