import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { fund, newTenant, submit, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../src/db/tenant-scope.ts';
import { postEntry, SYSTEM_ACCOUNTS } from '../src/journal/post-entry.ts';
import { balancesDifferingFromPostings, networkFeesExpensed } from '../src/journal/queries.ts';

/**
 * The journal reads reconciliation relies on (core/src/journal/queries.ts): proves the fee sum's
 * sign and netting, and that the ledger's self-check finds a balance written around postEntry.
 */
let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-1', 'ETH', 1_000n);
});
afterAll(() => t.dispose());

describe('journal queries', () => {
  it('networkFeesExpensed nets fees and their reversals per operation, and omits operations without one', async () => {
    const paid = await submit(t.db, tenantId, withdrawal({ amountMinor: '10' }), 'fee-paid');
    const none = await submit(t.db, tenantId, withdrawal({ amountMinor: '10' }), 'fee-none');
    const fee = (amount: bigint, kind: 'network_fee' | 'network_fee_reversal') =>
      withTenant(t.db, tenantId, (tx) =>
        postEntry(tx, {
          tenantId,
          operationId: paid.operation.operationId,
          kind,
          postings: [
            { account: SYSTEM_ACCOUNTS.networkFees, bucket: 'control', assetCode: 'ETH', amount: -amount },
            { account: SYSTEM_ACCOUNTS.custody, bucket: 'control', assetCode: 'ETH', amount },
          ],
        }),
      );
    await fee(7n, 'network_fee');
    await fee(-2n, 'network_fee_reversal');
    const expensed = await withTenant(t.db, tenantId, (tx) =>
      networkFeesExpensed(tx, tenantId, [paid.operation.operationId, none.operation.operationId]),
    );
    expect(expensed).toEqual(new Map([[paid.operation.operationId, 5n]]));
    expect(await withTenant(t.db, tenantId, (tx) => networkFeesExpensed(tx, tenantId, []))).toEqual(
      new Map(),
    );
  });

  it('balancesDifferingFromPostings is empty for a ledger written by postEntry and names a balance written around it', async () => {
    expect(await withTenant(t.db, tenantId, (tx) => balancesDifferingFromPostings(tx))).toEqual([]);
    // The test database's own connection is the owner: it can write the projection directly,
    // which the application role never can.
    await t.db.execute(
      sql`update balances set available = available + 1 where tenant_id = ${tenantId}::uuid and account_ref = 'acct-1'`,
    );
    expect(await withTenant(t.db, tenantId, (tx) => balancesDifferingFromPostings(tx))).toEqual([
      { accountRef: 'acct-1', assetCode: 'ETH' },
    ]);
  });
});
