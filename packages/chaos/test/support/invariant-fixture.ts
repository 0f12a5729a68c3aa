import { randomBytes } from 'node:crypto';
import { createWithdrawal, getOperation, type Operation, withTenant } from '@idem/core';
import { type AnvilInstance, anvilDevPrivateKeys, type Ledger, startAnvil } from '@idem/rails';
import { ETH, type FaultProxy, GWEI, startFaultProxy } from '@idem/testing/chain';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { provisionHotWalletTenant } from '@idem/testing/tenants';
import { createWorker, RailRegistry, type Worker } from '@idem/workers';
import pino from 'pino';
import postgres, { type Sql } from 'postgres';
import { createPublicClient, getAddress, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

export const CHAIN_ID = 31337;
export { ETH, GWEI };
/** The tenant's hot wallet: anvil's dev key 1, which the tests also sign with outside Idem. */
export const hotWallet = privateKeyToAccount(anvilDevPrivateKeys[1] as Hex);
/** The custodian's side of the check when no custodian is involved. */
export const noCustodian: Ledger = {
  transfers: [],
  deposits: [],
  countsByReference: {},
  webhookDeliveries: [],
};

/**
 * What the invariant tests judge: anvil with manual mining, a real PostgreSQL database with one
 * hot-wallet tenant (provisionHotWalletTenant), the real worker paying from it, and a postgres.js
 * reader as the chaos run's checks use. With `throughProxy` the worker reaches the node through
 * the recording proxy, as in the chaos run.
 */
export interface InvariantFixture {
  anvil: AnvilInstance;
  proxy: FaultProxy | null;
  chain: ReturnType<typeof createPublicClient>;
  database: TestDatabase;
  sql: Sql;
  tenantId: string;
  worker: Worker;
  /** A 0.1 ETH withdrawal from `acct-1` to a fresh address; its operation id. */
  newWithdrawal(): Promise<string>;
  operation(operationId: string): Promise<Operation>;
  dispose(): Promise<void>;
}

export async function startInvariantFixture(options: {
  name: string;
  confirmations: number;
  workerId: string;
  throughProxy: boolean;
}): Promise<InvariantFixture> {
  const anvil = await startAnvil({ chainId: CHAIN_ID, mining: 'manual' });
  const proxy = options.throughProxy ? await startFaultProxy(anvil.rpcUrl) : null;
  const database = await createTestDatabase({ maxConnections: 4 });
  const sql = postgres(database.url as string, { max: 1, onnotice: () => {} });
  const tenantId = await provisionHotWalletTenant(database.db, {
    name: options.name,
    hotWallet: hotWallet.address,
    confirmations: options.confirmations,
  });
  const worker = createWorker({
    db: database.db,
    rails: new RailRegistry({
      evm: { rpcUrl: proxy?.url ?? anvil.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000 },
    }),
    log: pino({ level: 'silent' }),
    workerId: options.workerId,
    leaseMs: 5_000,
  });
  return {
    anvil,
    proxy,
    chain: createPublicClient({ transport: http(anvil.rpcUrl) }),
    database,
    sql,
    tenantId,
    worker,
    async newWithdrawal() {
      const withdrawalId = `wd-${randomBytes(6).toString('hex')}`;
      const created = await withTenant(database.db, tenantId, (tx) =>
        createWithdrawal(tx, {
          tenantId,
          request: {
            withdrawalId,
            accountId: 'acct-1',
            asset: 'ETH',
            destination: getAddress(`0x${randomBytes(20).toString('hex')}`),
            amountMinor: (ETH / 10n).toString(),
          },
          idempotencyKey: `withdrawal-${withdrawalId}`,
        }),
      );
      return created.operation.operationId;
    },
    operation: (operationId) =>
      withTenant(database.db, tenantId, (tx) => getOperation(tx, tenantId, operationId)),
    async dispose() {
      await sql.end();
      await proxy?.close();
      await database.dispose();
      await anvil.stop();
    },
  };
}
