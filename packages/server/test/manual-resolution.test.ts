import { randomUUID } from 'node:crypto';
import type { StaffRole } from '@idem/contracts';
import {
  createStaffUser,
  createWithdrawal,
  getBalances,
  getOperation,
  type Operation,
  provisionHotWallet,
  withTenant,
} from '@idem/core';
import { type AnvilInstance, anvilDevPrivateKeys, startAnvil } from '@idem/rails';
import { mineUntilFinal, rpc, startFaultProxy } from '@idem/testing/chain';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { createWorker, RailRegistry } from '@idem/workers';
import pino from 'pino';
import { createPublicClient, createWalletClient, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { startSilentServer } from './support/in-process.ts';
import { ETH, evmAddress, provisionTenant } from './support/provision.ts';
import { PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * Manual resolution (I11-F4) over real HTTP, with a real chain behind the server: a stuck withdrawal is resolved
 * only by a proposal that another staff member approves, and only when the chain proves it.
 */
const CHAIN_ID = 31337;
const hotWalletKey = anvilDevPrivateKeys[1] as Hex;
const hotWallet = privateKeyToAccount(hotWalletKey).address;

let anvil: AnvilInstance;
let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenantId: string;
const staff = {} as Record<StaffRole, string>;

const { call, signIn: signInAs } = staffHttp(() => base);
const signIn = (role: StaffRole): Promise<StaffSession> =>
  signInAs({ tenantId, email: staff[role], password: PASSWORD });

const operation = (operationId: string) =>
  withTenant(database.db, tenantId, (tx) => getOperation(tx, tenantId, operationId));
const heldEth = async () => {
  const balances = await withTenant(database.db, tenantId, (tx) => getBalances(tx, tenantId, 'cust-7'));
  return BigInt(balances.find((b) => b.asset === 'ETH')?.held ?? 0);
};
const mine = (blocks: number) => rpc(anvil.rpcUrl, 'anvil_mine', [`0x${blocks.toString(16)}`]);

/** A withdrawal signed with the hot wallet's next nonce whose send never reached a node: UNKNOWN, held. */
async function signedNeverSent(): Promise<Operation> {
  const created = await withTenant(database.db, tenantId, (tx) =>
    createWithdrawal(tx, {
      tenantId,
      request: {
        withdrawalId: randomUUID(),
        accountId: 'cust-7',
        asset: 'ETH',
        destination: evmAddress(),
        amountMinor: (ETH / 10n).toString(),
      },
      idempotencyKey: `withdrawal-${randomUUID()}`,
    }),
  );
  // The node's chain id (I32-CHAIN) and fees (I12-FEES) are read before signing; nothing else reaches it, the send included.
  const proxy = await startFaultProxy(anvil.rpcUrl);
  proxy.fault = 'reset-without-forward';
  proxy.spareMethods = ['eth_chainId', 'eth_feeHistory'];
  const cut = createWorker({
    db: database.db,
    rails: new RailRegistry({
      evm: { rpcUrl: proxy.url, chainId: CHAIN_ID, requestTimeoutMs: 500 },
    }),
    log: pino({ level: 'silent' }),
    workerId: 'cut-off-worker',
    leaseMs: 5_000,
  });
  try {
    for (let i = 0; i < 3 && (await operation(created.operation.operationId)).state !== 'UNKNOWN'; i++) {
      await cut.runOnce();
    }
  } finally {
    await proxy.close();
  }
  const stuck = await operation(created.operation.operationId);
  expect(stuck.state).toBe('UNKNOWN');
  expect(stuck.chainNonce).not.toBeNull();
  return stuck;
}

beforeAll(async () => {
  anvil = await startAnvil({ chainId: CHAIN_ID });
  await mine(20);
  database = await createTestDatabase({ maxConnections: 5 });
  const passwordHash = await hashPassword(PASSWORD);
  ({ tenantId } = await provisionTenant(database.db, { name: 'Resolution Exchange' }));
  await provisionHotWallet(database.db, {
    tenantId,
    network: 'ethereum',
    address: hotWallet,
    keyRef: 'dev:1',
  });
  await provisionRiskPolicy(database.db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: ETH.toString(),
    fourEyesMinMinor: (5n * ETH).toString(),
    actor: 'test:setup',
  });
  await withTenant(database.db, tenantId, async (tx) => {
    for (const role of ['support', 'approver', 'operator', 'admin'] as const) {
      staff[role] = `${role}@resolution.invalid`;
      await createStaffUser(tx, { tenantId, email: staff[role], role, passwordHash });
    }
  });
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

describe('I11-F4 manual resolution over HTTP', () => {
  it('I11-F4 I32-FINAL one operator cannot resolve alone; an approver completes it only once the chain proves nothing can still be paid, the transaction that took the nonce final', async () => {
    const stuck = await signedNeverSent();
    const held = await heldEth();
    const operator = await signIn('operator');
    const approver = await signIn('approver');

    // The one-person path is gone: no state change, the hold is kept.
    const alone = await call('staff.resolve', {
      mutation: true,
      session: operator,
      input: {
        operationId: stuck.operationId,
        toState: 'VERIFIED_NOT_SENT',
        evidence: { summary: 'checked the explorer, nothing there' },
      },
    });
    expect(alone.status).not.toBe(200);
    expect((await operation(stuck.operationId)).state).toBe('UNKNOWN');
    expect(await heldEth()).toBe(held);

    // The operator proposes; the server binds the chain's answer as it is now (nonce not consumed).
    const proposed = await call('staffProposals.propose', {
      mutation: true,
      session: operator,
      input: {
        kind: 'resolve_withdrawal',
        idempotencyKey: `resolve-${stuck.operationId}`,
        payload: {
          operationId: stuck.operationId,
          toState: 'VERIFIED_NOT_SENT',
          summary: 'checked the explorer, nothing there',
        },
      },
    });
    expect(proposed.status).toBe(200);
    const proposal = (proposed.body.result?.data as { proposal: unknown } | undefined)?.proposal as {
      proposalId: string;
      payloadHash: string;
      state: string;
      approvalsRequired: number;
      evidence: { rail: { verdict: string; source: string; detail: Record<string, unknown> } };
    };
    expect(proposal).toMatchObject({ state: 'PENDING', approvalsRequired: 1 });
    expect(proposal.evidence.rail).toMatchObject({ verdict: 'UNPROVEN', source: 'chain' });
    expect(proposal.evidence.rail.detail).toMatchObject({ reason: 'nonce_not_consumed_at_depth' });
    expect((await operation(stuck.operationId)).state).toBe('UNKNOWN');

    // The operator may not decide, not even their own proposal.
    const selfDecide = await call('staffProposals.decide', {
      mutation: true,
      session: operator,
      input: { proposalId: proposal.proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
    });
    expect(selfDecide.status).toBe(403);

    // An approver approving while the stored bytes could still be mined: UNPROVEN, nothing changes.
    const early = await call('staffProposals.decide', {
      mutation: true,
      session: approver,
      input: { proposalId: proposal.proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
    });
    expect(early.status).toBe(422);
    expect(early.body.error?.data.code).toBe('UNPROVEN');
    expect(early.body.error?.data.detail).toContain('the stored transaction could still be mined');
    expect((await operation(stuck.operationId)).state).toBe('UNKNOWN');
    expect(await heldEth()).toBe(held);
    const still = await call('staffProposals.get', {
      session: approver,
      input: { proposalId: proposal.proposalId },
    });
    expect(still.body.result?.data).toMatchObject({ state: 'PENDING', approvalsGiven: 0 });

    // Another transaction takes the nonce and is buried past the asset's depth (12 for ETH).
    const wallet = createWalletClient({
      account: privateKeyToAccount(hotWalletKey),
      transport: http(anvil.rpcUrl),
    });
    const sweep = await wallet.sendTransaction({
      chain: null,
      to: hotWallet,
      value: 1n,
      nonce: stuck.chainNonce ?? -1,
    });
    const swept = await createPublicClient({ transport: http(anvil.rpcUrl) }).waitForTransactionReceipt({
      hash: sweep,
    });
    await mine(12);

    // At the asset's depth but above the node's finalized block: a deeper reorganisation could
    // still swap the sweep for our signed payment, so releasing now is refused (I32-FINAL).
    const notFinal = await call('staffProposals.decide', {
      mutation: true,
      session: approver,
      input: { proposalId: proposal.proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
    });
    expect(notFinal.status).toBe(422);
    expect(notFinal.body.error?.data.code).toBe('UNPROVEN');
    expect(notFinal.body.error?.data.detail).toContain(
      'the transaction that took the nonce is not final yet',
    );
    expect((await operation(stuck.operationId)).state).toBe('UNKNOWN');
    expect(await heldEth()).toBe(held);

    await mineUntilFinal(anvil.rpcUrl, swept.blockNumber);
    const approved = await call('staffProposals.decide', {
      mutation: true,
      session: approver,
      input: { proposalId: proposal.proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
    });
    expect(approved.status).toBe(200);
    expect(approved.body.result?.data).toMatchObject({
      proposal: { state: 'EXECUTED' },
      approvalsGiven: 1,
      approvalsRequired: 1,
    });
    const resolved = await operation(stuck.operationId);
    expect(resolved.state).toBe('VERIFIED_NOT_SENT');
    expect(await heldEth()).toBe(held - ETH / 10n);
  });
});
