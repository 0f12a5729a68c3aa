import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  getBalances,
  getOperation,
  operationStats,
  provisionHotWallet,
  withTenant,
} from '@idem/core';
import { anvilDevPrivateKeys, deployTestToken } from '@idem/rails';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, startEnvironment } from './environment.ts';

let env: Environment;
beforeAll(async () => {
  env = await startEnvironment();
});
afterAll(() => env.close());

describe('terminal failure drill (docs/RUNBOOK.md)', () => {
  it('C15 a withdrawal that reverts on chain goes FAILED_TERMINAL: alert fired, owner named, age in the metric, funds held', async () => {
    // A token the hot wallet holds none of: its transfer is mined and reverts.
    const token = await deployTestToken({
      rpcUrl: env.anvil.rpcUrl,
      chainId: CHAIN_ID,
      privateKey: anvilDevPrivateKeys[2] as Hex,
      symbol: 'USDT',
      decimals: 6,
      supplyMinor: 10n ** 12n,
    });
    const hotWallet = privateKeyToAccount(anvilDevPrivateKeys[3] as Hex).address;
    const { tenantId } = await createTenant(env.t.db, {
      name: 'Drill Exchange',
      assets: [{ code: 'USDT', network: 'ethereum', decimals: 6, confirmations: 1, contractAddress: token }],
    });
    await provisionHotWallet(env.t.db, {
      tenantId,
      network: 'ethereum',
      address: hotWallet,
      keyRef: 'dev:3',
      nextNonce: await env.chain.getTransactionCount({ address: hotWallet }),
    });
    await creditAsOperator(env.t.db, {
      tenantId,
      deposit: {
        reference: 'drill-funding',
        accountId: 'acct-drill',
        asset: 'USDT',
        amountMinor: '5000000',
      },
      idempotencyKey: 'drill-funding',
      actor: 'test',
    });
    await provisionRiskPolicy(env.t.db, {
      tenantId,
      assetCode: 'USDT',
      autoApproveMaxMinor: '1000000000',
      fourEyesMinMinor: '100000000000',
      actor: 'test',
    });
    const created = await withTenant(env.t.db, tenantId, (tx) =>
      createWithdrawal(tx, {
        tenantId,
        request: {
          withdrawalId: 'drill-1',
          accountId: 'acct-drill',
          asset: 'USDT',
          destination: env.hotWallet,
          amountMinor: '2500000',
        },
        idempotencyKey: 'withdrawal-drill-1',
      }),
    );
    const worker = env.worker({ escalationOwner: 'treasury-oncall' });
    await worker.runOnce();
    await env.mine(1);
    await worker.runOnce();

    const failed = await withTenant(env.t.db, tenantId, (tx) =>
      getOperation(tx, tenantId, created.operation.operationId),
    );
    expect(failed.state).toBe('FAILED_TERMINAL');
    expect(failed.owner).toBe('treasury-oncall');
    // The alert: a structured error line flagged for paging.
    const alert = env.logLines.find(
      (line) => line.includes('FAILED_TERMINAL') && line.includes('"alert":true'),
    );
    expect(alert).toBeDefined();
    // The metric's source shows the state with its age: left alone for two hours, it reads two hours.
    await env.t.db.execute(
      sql`update operations set updated_at = now() - interval '2 hours', version = version + 1 where operation_id = ${failed.operationId}`,
    );
    const stats = await operationStats(env.t.db);
    const terminal = stats.find((row) => row.state === 'FAILED_TERMINAL');
    expect(terminal?.operations).toBe(1);
    expect(terminal?.oldestSeconds).toBeGreaterThanOrEqual(7_200);
    expect(terminal?.oldestSeconds).toBeLessThan(7_200 + 300);
    // Funds still held.
    const balances = await withTenant(env.t.db, tenantId, (tx) => getBalances(tx, tenantId, 'acct-drill'));
    expect(balances).toEqual([{ asset: 'USDT', available: '2500000', held: '2500000' }]);
  });
});
