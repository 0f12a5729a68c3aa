import { randomBytes } from 'node:crypto';
import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  type EgressPolicy,
  getBalances,
  getOperation,
  type Operation,
  provisionHotWallet,
  registerDepositAddress,
  withTenant,
} from '@idem/core';
import { type AnvilInstance, anvilDevPrivateKeys, createCustodianAdapter, startAnvil } from '@idem/rails';
import { ETH, rpc } from '@idem/testing/chain';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import pino, { type Logger } from 'pino';
import { createPublicClient, getAddress, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { expect, vi } from 'vitest';
import type { WorkerContext } from '../src/context.ts';
import { RailRegistry, type RailsConfig } from '../src/rails.ts';
import { createWorker, type WorkerOptions } from '../src/worker.ts';

export { ETH };
export const CHAIN_ID = 31337;

/**
 * The tests' receivers listen on 127.0.0.1: a deployment's allowlist admits them, as one would
 * admit an internal receiver (plain http only because the allowlist names the host).
 */
export const LOCAL_RECEIVERS: EgressPolicy = { allowPlainHttp: false, allowInternal: ['127.0.0.1'] };

/**
 * A clock for a worker's `now` option that a test moves forward: a row is aged by advancing the
 * clock past an age of minutes, so a slow pass on a loaded machine can never cross the next age
 * by itself (a fixed sleep past an age of a second or two could).
 */
export function testClock(): { now: () => number; advance(ms: number): void } {
  let offsetMs = 0;
  return {
    now: () => Date.now() + offsetMs,
    advance: (ms) => {
      offsetMs += ms;
    },
  };
}

/**
 * A real PostgreSQL (or PGlite) database, a real anvil node, and one tenant whose hot wallet is
 * anvil's dev account 1, with ETH confirmed at depth 2 and auto-approval up to 10 ETH.
 */
export interface Environment {
  t: TestDatabase;
  anvil: AnvilInstance;
  tenantId: string;
  hotWallet: Hex;
  rpcUrl: string;
  chain: ReturnType<typeof createPublicClient>;
  log: Logger;
  logLines: string[];
  worker(
    options?: Omit<Partial<WorkerOptions>, 'rails'> & { rails?: RailsConfig },
  ): ReturnType<typeof createWorker>;
  withdraw(amountWei: bigint, overrides?: { destination?: string; asset?: string }): Promise<Operation>;
  operation(id: string): Promise<Operation>;
  mine(blocks: number): Promise<void>;
  /** Registers a deposit address of the tenant's for an account. */
  registerDepositAddress(network: 'ethereum' | 'bitcoin', address: string, accountRef: string): Promise<void>;
  /** An account's available balance of an asset, in minor units. */
  available(accountRef: string, asset: string): Promise<bigint>;
  balanceOf(address: string): Promise<bigint>;
  close(): Promise<void>;
}

export async function startEnvironment(
  options: {
    mining?: 'auto' | 'manual';
    rpcUrl?: (anvilUrl: string) => Promise<string>;
    /** The assets' reconciliation windows (the default hour when omitted). */
    reconciliationWindowSeconds?: { ETH?: number; BTC?: number };
    /** Another hot wallet than anvil's dev account 1 (an HSM key); funded with 100 ETH. */
    hotWallet?: { address: Hex; keyRef: string };
  } = {},
): Promise<Environment> {
  const windows = options.reconciliationWindowSeconds ?? {};
  const anvil = await startAnvil({ chainId: CHAIN_ID, mining: options.mining ?? 'auto' });
  const t = await createTestDatabase({ maxConnections: 10 });
  const { tenantId } = await createTenant(t.db, {
    name: 'Worker Test Exchange',
    assets: [
      {
        code: 'ETH',
        network: 'ethereum',
        decimals: 18,
        confirmations: 2,
        reconciliationWindowSeconds: windows.ETH,
      },
      {
        code: 'BTC',
        network: 'bitcoin',
        decimals: 8,
        confirmations: 3,
        reconciliationWindowSeconds: windows.BTC,
      },
    ],
  });
  const hotWallet = options.hotWallet?.address ?? privateKeyToAccount(anvilDevPrivateKeys[1] as Hex).address;
  const keyRef = options.hotWallet?.keyRef ?? 'dev:1';
  if (options.hotWallet)
    await rpc(anvil.rpcUrl, 'anvil_setBalance', [hotWallet, `0x${(100n * ETH).toString(16)}`]);
  await provisionHotWallet(t.db, { tenantId, network: 'ethereum', address: hotWallet, keyRef });
  await provisionRiskPolicy(t.db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: (10n * ETH).toString(),
    fourEyesMinMinor: (100n * ETH).toString(),
    actor: 'test',
  });
  await provisionRiskPolicy(t.db, {
    tenantId,
    assetCode: 'BTC',
    autoApproveMaxMinor: '1000000000',
    fourEyesMinMinor: '100000000000',
    actor: 'test',
  });
  // The opening balances, as the deployment's own tools credit them (no chain evidence).
  for (const asset of ['ETH', 'BTC']) {
    await creditAsOperator(t.db, {
      tenantId,
      deposit: {
        reference: `seed-${asset}`,
        accountId: 'acct-1',
        asset,
        amountMinor: (1000n * ETH).toString(),
      },
      idempotencyKey: `seed-${asset}`,
      actor: 'test',
    });
  }
  const rpcUrl = options.rpcUrl ? await options.rpcUrl(anvil.rpcUrl) : anvil.rpcUrl;
  const chain = createPublicClient({ transport: http(anvil.rpcUrl) });
  const logLines: string[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) });
  return {
    t,
    anvil,
    tenantId,
    hotWallet,
    rpcUrl,
    chain,
    log,
    logLines,
    worker: (overrides = {}) => {
      const { rails, ...rest } = overrides;
      return createWorker({
        db: t.db,
        rails: new RailRegistry(rails ?? { evm: { rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000 } }),
        log,
        workerId: `worker-${randomBytes(3).toString('hex')}`,
        leaseMs: 5_000,
        egress: LOCAL_RECEIVERS,
        ...rest,
      });
    },
    withdraw: async (amountWei, overrides = {}) => {
      const withdrawalId = `wd-${randomBytes(6).toString('hex')}`;
      const destination = overrides.destination ?? getAddress(`0x${randomBytes(20).toString('hex')}`);
      const created = await withTenant(t.db, tenantId, (tx) =>
        createWithdrawal(tx, {
          tenantId,
          request: {
            withdrawalId,
            accountId: 'acct-1',
            asset: overrides.asset ?? 'ETH',
            destination,
            amountMinor: amountWei.toString(),
          },
          idempotencyKey: `withdrawal-${withdrawalId}`,
        }),
      );
      return created.operation;
    },
    operation: (id) => withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, id)),
    mine: async (blocks) => {
      await rpc(anvil.rpcUrl, 'anvil_mine', [`0x${blocks.toString(16)}`]);
    },
    registerDepositAddress: (network, address, accountRef) =>
      withTenant(t.db, tenantId, (tx) =>
        registerDepositAddress(tx, { tenantId, network, address, accountRef }),
      ),
    available: async (accountRef, asset) => {
      const balances = await withTenant(t.db, tenantId, (tx) => getBalances(tx, tenantId, accountRef));
      return BigInt(balances.find((b) => b.asset === asset)?.available ?? 0);
    },
    balanceOf: (address) => chain.getBalance({ address: address as Hex }),
    close: async () => {
      await t.dispose();
      await anvil.stop();
    },
  };
}

/** Sends one JSON-RPC call to the node directly (test-only controls such as reorgs). */
export { rpc };

/** One worker pass, and the balance reconciliation it starts beside itself, to the end. */
export async function passAndReconcile(
  env: Environment,
  options: Parameters<Environment['worker']>[0],
): Promise<void> {
  const worker = env.worker(options);
  await worker.runOnce();
  await worker.idle();
}

/** The context reconciliation tests run `reconcileTenant` with (the worker's defaults otherwise). */
export function reconcilerContext(db: TestDatabase['db'], rails: RailsConfig, log: Logger): WorkerContext {
  return {
    db,
    rails: new RailRegistry(rails),
    log,
    workerId: 'reconciler',
    leaseMs: 5_000,
    batchSize: 20,
    reorgWindowSeconds: 3_600,
    unknownEscalateAfterMs: 60_000,
    notSentConfirmIntervalMs: 60_000,
    escalationOwner: 'ops-oncall',
    now: Date.now,
  };
}

/**
 * Until the custodian at `custodianUrl` reports each withdrawal's transfer (by our reference, the
 * operation id) completed: a simulator told to settle `afterMs` after submission has done so.
 */
export async function completedAtCustodian(custodianUrl: string, ...operationIds: string[]): Promise<void> {
  const custodian = createCustodianAdapter({ baseUrl: custodianUrl });
  await vi.waitFor(
    async () => {
      for (const operationId of operationIds) {
        const held = await custodian.lookupByReference(operationId);
        expect(held.found === 'one' ? held.transfer.status : held.found, operationId).toBe('completed');
      }
    },
    { timeout: 10_000, interval: 100 },
  );
}
