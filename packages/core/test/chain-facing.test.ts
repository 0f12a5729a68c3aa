import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import {
  balanceOf,
  databaseRefusal,
  evmAddress,
  newTenant,
  refusal,
  submit,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../src/db/tenant-scope.ts';
import { allocateNonce, provisionHotWallet } from '../src/hot-wallets/hot-wallets.ts';
import { creditAsOperator } from '../src/operations/record-credit.ts';
import { reverseDeposit } from '../src/operations/reverse-deposit.ts';
import { closeBreak, listBreaks, openBreak } from '../src/reconciliation/breaks.ts';

let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase({ maxConnections: 20 });
  tenantId = await newTenant(t.db);
});
afterAll(() => t.dispose());

describe('hot wallet nonces', () => {
  it('40 concurrent signers never share a nonce and none is skipped', async () => {
    await provisionHotWallet(t.db, { tenantId, network: 'ethereum', address: evmAddress(), keyRef: 'dev:0' });
    const nonces = await Promise.all(
      Array.from({ length: 40 }, () =>
        withTenant(t.db, tenantId, async (tx) => (await allocateNonce(tx, tenantId, 'ethereum')).nonce),
      ),
    );
    expect([...nonces].sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => i));
  });

  it('a nonce handed out in a rolled-back transaction is handed out again', async () => {
    const before = await withTenant(
      t.db,
      tenantId,
      async (tx) => (await allocateNonce(tx, tenantId, 'ethereum')).nonce,
    );
    await expect(
      withTenant(t.db, tenantId, async (tx) => {
        await allocateNonce(tx, tenantId, 'ethereum');
        throw new Error('signing failed');
      }),
    ).rejects.toThrow('signing failed');
    const after = await withTenant(
      t.db,
      tenantId,
      async (tx) => (await allocateNonce(tx, tenantId, 'ethereum')).nonce,
    );
    expect(after).toBe(before + 1);
    const message = await databaseRefusal(t.db.execute(sql`update hot_wallets set next_nonce = 0`));
    expect(message).toMatch(/cannot go back/);
  });
});

describe('reconciliation breaks', () => {
  it('C21 a break is recorded with class and owner, deduplicated per subject, and closed only with evidence', async () => {
    const first = await withTenant(t.db, tenantId, (tx) =>
      openBreak(tx, {
        tenantId,
        breakClass: 'genuine_variance',
        subject: 'wallet:ethereum:ETH',
        assetCode: 'ETH',
        ledgerAmountMinor: '100',
        observedAmountMinor: '90',
        details: { source: 'test' },
      }),
    );
    expect(first.opened).toBe(true);
    expect(first.break.owner).toBe('finance-controller');
    const again = await withTenant(t.db, tenantId, (tx) =>
      openBreak(tx, {
        tenantId,
        breakClass: 'genuine_variance',
        subject: 'wallet:ethereum:ETH',
        details: { source: 'again' },
      }),
    );
    expect(again.opened).toBe(false);
    expect(again.break.breakId).toBe(first.break.breakId);
    const noEvidence = await refusal(
      withTenant(t.db, tenantId, (tx) =>
        closeBreak(tx, { tenantId, breakId: first.break.breakId, closedBy: 'staff:fc', evidence: {} }),
      ),
    );
    expect(noEvidence.code).toBe('VALIDATION');
    const closed = await withTenant(t.db, tenantId, (tx) =>
      closeBreak(tx, {
        tenantId,
        breakId: first.break.breakId,
        closedBy: 'staff:fc',
        evidence: { finding: 'fee paid from hot wallet' },
      }),
    );
    expect(closed.status).toBe('closed');
    const message = await databaseRefusal(
      t.db.execute(sql`update reconciliation_breaks set owner = 'x' where status = 'closed'`),
    );
    expect(message).toMatch(/is closed/);
    const open = await withTenant(t.db, tenantId, (tx) => listBreaks(tx, { tenantId, status: 'open' }));
    expect(open).toEqual([]);
  });
});

describe('deposits undone by a reorganisation', () => {
  it('C17 a reorged deposit is reversed by a compensating entry and raises a break', async () => {
    const deposit = await creditAsOperator(t.db, {
      tenantId,
      deposit: { reference: 'tx-reorged-0', accountId: 'acct-dep', asset: 'ETH', amountMinor: '500' },
      idempotencyKey: 'deposit-tx-reorged-0',
      actor: 'chain-watcher',
    });
    expect(await balanceOf(t.db, tenantId, 'acct-dep')).toEqual({ available: 500n, held: 0n });
    const result = await withTenant(t.db, tenantId, (tx) =>
      reverseDeposit(tx, {
        deposit: deposit.operation,
        actor: 'chain-watcher',
        evidence: { blockHash: '0xgone' },
      }),
    );
    expect(result.reversed).toBe(true);
    expect(result.operation.state).toBe('REVERSED');
    expect(await balanceOf(t.db, tenantId, 'acct-dep')).toEqual({ available: 0n, held: 0n });
    const breaks = await withTenant(t.db, tenantId, (tx) => listBreaks(tx, { tenantId, status: 'open' }));
    expect(breaks.map((b) => b.subject)).toContain(`operation:${deposit.operation.operationId}`);
  });

  it('C21 a reorged deposit already spent cannot post its reversal: a genuine variance break, balances untouched', async () => {
    const deposit = await creditAsOperator(t.db, {
      tenantId,
      deposit: { reference: 'tx-spent-0', accountId: 'acct-spent', asset: 'ETH', amountMinor: '500' },
      idempotencyKey: 'deposit-tx-spent-0',
      actor: 'chain-watcher',
    });
    await submit(t.db, tenantId, withdrawal({ accountId: 'acct-spent', amountMinor: '400' }), 'spend-it');
    const result = await withTenant(t.db, tenantId, (tx) =>
      reverseDeposit(tx, {
        deposit: deposit.operation,
        actor: 'chain-watcher',
        evidence: { blockHash: '0xgone' },
      }),
    );
    expect(result.reversed).toBe(false);
    expect(await balanceOf(t.db, tenantId, 'acct-spent')).toEqual({ available: 100n, held: 400n });
    const breaks = await withTenant(t.db, tenantId, (tx) => listBreaks(tx, { tenantId, status: 'open' }));
    const variance = breaks.find((b) => b.subject === `operation:${deposit.operation.operationId}`);
    expect(variance?.breakClass).toBe('genuine_variance');
  });
});
