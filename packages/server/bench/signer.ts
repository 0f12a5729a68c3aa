import type { ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  approvalChallenge,
  createStaffUser,
  createTenant,
  createWithdrawal,
  creditAsOperator,
  type Database,
  decideWithdrawal,
  type Operation,
  openDatabase,
  provisionHotWallet,
  registerPasskey,
  registrationChallenge,
  relyingPartyOf,
  reviewWithdrawal,
  setRiskPolicyAsOperator,
  staffActor,
  withTenant,
} from '@idem/core';
import { SoftPasskey } from '@idem/testing/passkeys';
import { initSoftHsmToken, softHsmModulePath, tokenKey } from '@idem/testing/signer';
import { sql } from 'drizzle-orm';
import { getAddress, type Hex, serializeTransaction } from 'viem';
import { bundle } from '../scripts/bundle.ts';
import { startSignerProcess, stopSignerProcess } from '../scripts/signer-process.ts';
import { pinTenant, tenantTrustAtBootstrap } from '../src/signer-service/trust-file.ts';
import { scratchDatabase } from './support.ts';

/**
 * `pnpm bench` (server, signer part): signing requests per second through the signer service, its
 * own process on SoftHSM2 with a read-only login on PostgreSQL. Serially, for withdrawals the
 * automatic review approved (the pinned limit alone decides) and for ones a person approved on a
 * passkey (each request follows the chain of trust and verifies an assertion); then one caller per
 * tenant at once, since one wallet's nonces are signed in order and concurrency is across wallets.
 * Not on the creation path: a withdrawal's creation never waits for the signer.
 */
const PER_MODE = Number(process.env.BENCH_SIGNER_REQUESTS ?? 150);
const TENANTS = 4;
const ETH = 10n ** 18n;
const CHAIN_ID = 31337;
const ORIGIN = 'https://staff.bench.test';
const rp = relyingPartyOf(ORIGIN);

interface BenchTenant {
  tenantId: string;
  approver: string;
  key: SoftPasskey;
  nextNonce: number;
}

async function setUpTenant(db: Database, index: number, token: ReturnType<typeof initSoftHsmToken>) {
  const { tenantId } = await createTenant(db, {
    name: `Signer Bench ${index}`,
    assets: [{ code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 1 }],
  });
  const wallet = await tokenKey(token, `bench-wallet-${index}`);
  await provisionHotWallet(db, {
    tenantId,
    network: 'ethereum',
    address: wallet.address,
    keyRef: wallet.keyRef,
  });
  await creditAsOperator(db, {
    tenantId,
    deposit: { reference: 'fund', accountId: 'acct', asset: 'ETH', amountMinor: (10n ** 24n).toString() },
    idempotencyKey: 'fund',
    actor: 'bench',
  });
  await setRiskPolicyAsOperator(db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: ETH.toString(),
    fourEyesMinMinor: (10n ** 30n).toString(),
    velocityMaxPerHour: 1_000_000,
    actor: 'bench',
  });
  // The tenant's one admin registers its first passkey: the anchor the trust file pins.
  const admin = await withTenant(db, tenantId, (tx) =>
    createStaffUser(tx, {
      tenantId,
      email: `admin-${index}@bench.test`,
      role: 'admin',
      passwordHash: 'none',
    }),
  );
  const key = new SoftPasskey(ORIGIN);
  await withTenant(db, tenantId, (tx) =>
    registerPasskey(tx, {
      tenantId,
      userId: admin.userId,
      label: 'bench',
      registration: key.register(registrationChallenge(admin.userId, 'bench')),
      rp,
      sessionSecret: 'bench',
    }),
  );
  return { tenantId, approver: staffActor(admin.userId), key, nextNonce: 0 };
}

/** An APPROVED withdrawal: by the automatic review (under 1 ETH), or by the admin's passkey. */
async function approved(db: Database, tenant: BenchTenant, byPerson: boolean): Promise<Operation> {
  const id = `wd-${randomBytes(6).toString('hex')}`;
  return withTenant(db, tenant.tenantId, async (tx) => {
    const created = await createWithdrawal(tx, {
      tenantId: tenant.tenantId,
      request: {
        withdrawalId: id,
        accountId: 'acct',
        asset: 'ETH',
        destination: getAddress(`0x${randomBytes(20).toString('hex')}`),
        amountMinor: (byPerson ? 2n * ETH : ETH / 1000n).toString(),
      },
      idempotencyKey: `withdrawal-${id}`,
    });
    const op = await reviewWithdrawal(tx, created.operation);
    if (!byPerson) return op;
    const decided = await decideWithdrawal(tx, {
      tenantId: tenant.tenantId,
      operationId: op.operationId,
      staffId: tenant.approver,
      payloadHash: op.payloadHash,
      decision: 'approve',
      assertion: tenant.key.assert(approvalChallenge(op.operationId, op.payloadHash, 'approve')),
      relyingParty: rp,
    });
    return decided.operation;
  });
}

async function sign(url: string, token: string, tenant: BenchTenant, op: Operation): Promise<number> {
  const transaction = serializeTransaction({
    type: 'eip1559',
    chainId: CHAIN_ID,
    nonce: tenant.nextNonce,
    gas: 21_000n,
    maxFeePerGas: 3_000_000_000n,
    maxPriorityFeePerGas: 1_000_000_000n,
    to: op.destination as Hex,
    value: BigInt(op.amountMinor),
  });
  const started = performance.now();
  const response = await fetch(`${url}/v1/sign`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({
      tenantId: tenant.tenantId,
      operationId: op.operationId,
      kind: 'payment',
      transaction,
    }),
  });
  const elapsed = performance.now() - started;
  const body = (await response.json()) as { signature?: unknown; error?: { code: string; message: string } };
  if (!body.signature) throw new Error(`the signer refused: ${JSON.stringify(body.error)}`);
  return elapsed;
}

/** Signs every operation of each tenant in order, tenants side by side; the wallets' nonces move after each. */
async function signAll(
  db: Database,
  url: string,
  token: string,
  work: { tenant: BenchTenant; ops: Operation[] }[],
): Promise<{ requests: number; perSecond: number; p50Ms: number; p99Ms: number }> {
  const latencies: number[] = [];
  const started = performance.now();
  let moving = 0;
  await Promise.all(
    work.map(async ({ tenant, ops }) => {
      for (const op of ops) {
        latencies.push(await sign(url, token, tenant, op));
        // As the worker's claim does after a signature: the wallet's next nonce moves on.
        const t0 = performance.now();
        await db.execute(sql`update hot_wallets set next_nonce = next_nonce + 1
          where tenant_id = ${tenant.tenantId}::uuid and network = 'ethereum'`);
        moving += performance.now() - t0;
        tenant.nextNonce += 1;
      }
    }),
  );
  // The nonce updates are the bench's, not the service's: their time is taken out (serial runs).
  const seconds = (performance.now() - started - (work.length === 1 ? moving : 0)) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return {
    requests: latencies.length,
    perSecond: latencies.length / seconds,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
  };
}

async function main(): Promise<void> {
  if (!softHsmModulePath()) {
    console.log('signer bench skipped: SoftHSM2 is not installed (.ci/run installs it)');
    return;
  }
  await bundle('cli');
  const scratch = await scratchDatabase('idem_bench_signer');
  const db = await openDatabase({ url: scratch.url, maxConnections: 8 });
  const token = initSoftHsmToken();
  const dir = mkdtempSync(join(tmpdir(), 'idem-bench-signer-'));
  const login = `idem_signer_bench_${randomBytes(4).toString('hex')}`;
  let signer: ChildProcess | undefined;
  try {
    await db.migrate();
    const tenants: BenchTenant[] = [];
    for (let i = 0; i < TENANTS; i += 1) tenants.push(await setUpTenant(db.db, i, token));
    const trustFile = join(dir, 'trust.json');
    let file = null;
    for (const tenant of tenants) {
      const trust = await withTenant(db.db, tenant.tenantId, (tx) =>
        tenantTrustAtBootstrap(tx, tenant.tenantId),
      );
      file = pinTenant(trustFile, { tenantId: tenant.tenantId, origin: ORIGIN, trust }, file);
    }
    await db.db.execute(sql.raw(`create role ${login} login in role idem_signer`));
    const signerUrl = new URL(scratch.url);
    signerUrl.username = login;
    signerUrl.password = '';
    const workerToken = randomBytes(24).toString('hex');
    const started = await startSignerProcess({
      ...token.env,
      IDEM_SIGNER_PKCS11_MODULE: token.modulePath,
      IDEM_SIGNER_PKCS11_MODULES: token.modulePath,
      IDEM_SIGNER_PKCS11_TOKEN: token.tokenLabel,
      IDEM_SIGNER_PKCS11_PIN: token.pin,
      IDEM_SIGNER_LISTEN: '127.0.0.1:0',
      IDEM_SIGNER_WORKERS: `bench=${createHash('sha256').update(workerToken).digest('hex')}`,
      IDEM_SIGNER_DATABASE_URL: signerUrl.toString(),
      IDEM_SIGNER_CHAIN_ID: String(CHAIN_ID),
      IDEM_SIGNER_LOG: join(dir, 'signer-log.jsonl'),
      IDEM_SIGNER_TRUST_FILE: trustFile,
      LOG_LEVEL: 'warn',
    });
    signer = started.child;
    const url = started.url;
    const [first] = tenants as [BenchTenant];
    // Warm-up: the HSM key opens and the login's first reads happen outside the figures.
    await signAll(db.db, url, workerToken, [{ tenant: first, ops: [await approved(db.db, first, false)] }]);

    const rows: [string, Awaited<ReturnType<typeof signAll>>][] = [];
    for (const byPerson of [false, true]) {
      const ops: Operation[] = [];
      for (let i = 0; i < PER_MODE; i += 1) ops.push(await approved(db.db, first, byPerson));
      rows.push([
        `serial, ${byPerson ? 'passkey-approved' : 'auto-approved'}`,
        await signAll(db.db, url, workerToken, [{ tenant: first, ops }]),
      ]);
    }
    const work: { tenant: BenchTenant; ops: Operation[] }[] = [];
    for (const tenant of tenants) {
      const ops: Operation[] = [];
      for (let i = 0; i < PER_MODE / TENANTS; i += 1) ops.push(await approved(db.db, tenant, i % 2 === 1));
      work.push({ tenant, ops });
    }
    rows.push([`${TENANTS} callers, half passkey-approved`, await signAll(db.db, url, workerToken, work)]);

    console.log('signer service                      requests  per second  p50 ms  p99 ms');
    for (const [name, figures] of rows) {
      console.log(
        `${name.padEnd(36)}${String(figures.requests).padStart(8)}${figures.perSecond.toFixed(1).padStart(12)}` +
          `${figures.p50Ms.toFixed(1).padStart(8)}${figures.p99Ms.toFixed(1).padStart(8)}`,
      );
    }
  } finally {
    await stopSignerProcess(signer);
    await db.close();
    await scratch.drop();
    const admin = await openDatabase({
      url: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
      maxConnections: 1,
    });
    await admin.db.execute(sql.raw(`drop role if exists ${login}`));
    await admin.close();
    token.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
