import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ReconciliationRunDetail, SignedRunReport, StaffRole } from '@idem/contracts';
import {
  createOutboundEndpoint,
  createStaffUser,
  createTenant,
  creditAsOperator,
  provisionHotWallet,
  withTenant,
} from '@idem/core';
import { type AnvilInstance, startAnvil } from '@idem/rails';
import { rpc } from '@idem/testing/chain';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { verifyRunReport } from '@idem/workers';
import { toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { idem } from './support/cli-process.ts';
import { LOCAL_RECEIVERS, startSilentServer } from './support/in-process.ts';
import { ETH } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * I13-BAL on demand, over real HTTP with a real chain behind the server: an operator runs a balance
 * reconciliation from the staff screens' procedure, the run is listed with its figures, exported as
 * CSV and as JSON signed with the tenant's own outbound-webhook secret, and the auditor's
 * `idem reconcile verify` accepts the report and refuses a tampered one.
 */
const CHAIN_ID = 31337;

let anvil: AnvilInstance;
let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenantId: string;
let secret: string;
let hotWallet: string;
const staff = {} as Record<StaffRole, string>;

const { call, signIn: signInAs } = staffHttp(() => base);
const signIn = (role: StaffRole): Promise<StaffSession> =>
  signInAs({ tenantId, email: staff[role], password: PASSWORD });

beforeAll(async () => {
  anvil = await startAnvil({ chainId: CHAIN_ID });
  database = await createTestDatabase({ maxConnections: 5 });
  const passwordHash = await hashPassword(PASSWORD);
  ({ tenantId } = await createTenant(database.db, {
    name: 'Audited Exchange',
    mfaRequired: false,
    assets: [{ code: 'ETH', network: 'ethereum', decimals: 18, confirmations: 2 }],
  }));
  // A fresh hot wallet: empty, like the ledger.
  hotWallet = privateKeyToAccount(generatePrivateKey()).address;
  await provisionHotWallet(database.db, {
    tenantId,
    network: 'ethereum',
    address: hotWallet,
    keyRef: 'env:UNUSED',
  });
  await withTenant(database.db, tenantId, async (tx) => {
    for (const role of ['support', 'operator'] as const) {
      staff[role] = `${role}@audited.invalid`;
      await createStaffUser(tx, { tenantId, email: staff[role], role, passwordHash });
    }
  });
  ({ secret } = await createOutboundEndpoint(
    database.db,
    tenantId,
    { url: 'http://127.0.0.1:9/hooks' },
    LOCAL_RECEIVERS,
  ));
  ({ server, base } = await startSilentServer(database, {
    IDEM_EVM_RPC_URL: anvil.rpcUrl,
    IDEM_EVM_CHAIN_ID: String(CHAIN_ID),
    IDEM_WORKER_IN_PROCESS: 'false',
  }));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
  await anvil?.stop();
});

const setBalance = (wei: bigint) => rpc(anvil.rpcUrl, 'anvil_setBalance', [hotWallet, toHex(wei)]);

/** The auditor's `idem reconcile verify` on a downloaded report, as a separate process. */
const verifyWithCli = (file: string, key: string) =>
  idem({}, 'reconcile', 'verify', file, '--secret', key, '--json');

describe('I13-BAL balance reconciliation on demand', () => {
  it('I13-BAL C21 an operator runs it now; support may read but not run it', async () => {
    const support = await signIn('support');
    const refused = await call('staffReconciliation.runNow', { mutation: true, session: support, input: {} });
    expect(refused.status).toBe(403);

    const operator = await signIn('operator');
    const ran = await call('staffReconciliation.runNow', { mutation: true, session: operator, input: {} });
    const run = dataOf<ReconciliationRunDetail>(ran);
    expect(run.ranBy).toMatch(/^staff:/);
    expect(run.trigger).toBe('on_demand');
    expect(run.result).toBe('balanced');
    const eth = run.figures.find((f) => f.place === 'chain:ethereum' && f.assetCode === 'ETH');
    expect(eth).toMatchObject({ expectedMinor: '0', observedMinor: '0', unexplainedMinor: '0' });

    const listed = dataOf<{ runId: string }[]>(
      await call('staffReconciliation.runs', { session: support, input: {} }),
    );
    expect(listed.map((r) => r.runId)).toContain(run.runId);
  });

  it('I13-BAL a variance found on demand is a break, and the run exports as CSV and as a signed report an auditor verifies', async () => {
    // 3 ETH credited in the ledger, which the hot wallet holds: agreement; then 0.25 ETH vanishes.
    await setBalance(3n * ETH);
    await creditAsOperator(database.db, {
      tenantId,
      deposit: {
        reference: 'opening',
        accountId: 'cust-7',
        asset: 'ETH',
        amountMinor: (3n * ETH).toString(),
      },
      idempotencyKey: 'opening-eth',
      actor: 'test',
    });
    const operator = await signIn('operator');
    const agreed = dataOf<ReconciliationRunDetail>(
      await call('staffReconciliation.runNow', { mutation: true, session: operator, input: {} }),
    );
    expect(agreed.result).toBe('balanced');
    await setBalance(3n * ETH - ETH / 4n);
    const run = dataOf<ReconciliationRunDetail>(
      await call('staffReconciliation.runNow', { mutation: true, session: operator, input: {} }),
    );
    expect(run.result).toBe('variance');
    expect(run.breaksOpened).toBe(1);
    const eth = run.figures.find((f) => f.assetCode === 'ETH');
    expect(eth?.unexplainedMinor).toBe((-ETH / 4n).toString());
    expect(eth?.breakId).not.toBeNull();

    const support = await signIn('support');
    const csv = dataOf<{ filename: string; csv: string }>(
      await call('staffReconciliation.exportCsv', { session: support, input: { runId: run.runId } }),
    );
    const lines = csv.csv.trim().split('\r\n');
    expect(lines[0]).toMatch(/^run_id,ran_by,trigger,/);
    expect(lines.find((line) => line.includes(',chain:ethereum,ETH,'))).toContain(
      `,${(3n * ETH).toString()},${(3n * ETH - ETH / 4n).toString()},`,
    );

    const report = dataOf<SignedRunReport>(
      await call('staffReconciliation.exportSigned', { session: support, input: { runId: run.runId } }),
    );
    expect(JSON.stringify(report)).not.toContain(secret);
    expect(verifyRunReport(JSON.stringify(report), secret).runId).toBe(run.runId);

    const directory = mkdtempSync(join(tmpdir(), 'idem-report-'));
    try {
      const genuine = join(directory, 'report.json');
      writeFileSync(genuine, JSON.stringify(report));
      const accepted = await verifyWithCli(genuine, secret);
      expect(accepted.code).toBe(0);
      expect(JSON.parse(accepted.stdout)).toMatchObject({
        verified: true,
        runId: run.runId,
        result: 'variance',
      });

      // Someone edits the figures to hide the variance: the signature no longer matches.
      const tampered = join(directory, 'tampered.json');
      writeFileSync(
        tampered,
        JSON.stringify({ ...report, payload: report.payload.replace('"variance"', '"balanced"') }),
      );
      const refused = await verifyWithCli(tampered, secret);
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stdout)).toMatchObject({ verified: false });
      // And a report is not verified by another tenant's (or a guessed) secret.
      const otherSecret = await verifyWithCli(genuine, `whsec_${Buffer.alloc(32, 7).toString('base64')}`);
      expect(otherSecret.code).toBe(1);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
