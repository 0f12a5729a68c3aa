import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import {
  approveWithdrawal,
  balanceOf,
  ETH,
  evmAddress,
  fund,
  newTenant,
  refusal,
  submit,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations, workItems } from '../src/db/schema/index.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { findByKey, getOperation } from '../src/operations/operation-record.ts';
import { leaseForSigning, recordSigned } from '../src/state-machine/lease.ts';
import { transition } from '../src/state-machine/transition.ts';

let t: TestDatabase;
let tenantA: string;
let tenantB: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantA = await newTenant(t.db, 'Alpha');
  tenantB = await newTenant(t.db, 'Beta');
  await fund(t.db, tenantA, 'acct-1', 'ETH', 10n * ETH);
  await fund(t.db, tenantB, 'acct-1', 'ETH', 10n * ETH);
});
afterAll(() => t.dispose());

async function operationCount(tenantId: string): Promise<number> {
  const rows = await t.db
    .select({ n: sql<number>`count(*)::int` })
    .from(operations)
    .where(sql`tenant_id = ${tenantId} and kind = 'withdrawal'`);
  return rows[0]?.n ?? 0;
}

describe('operation identity', () => {
  it('C01 two tenants submitting the same key get two operations, and neither sees the other', async () => {
    const key = 'withdrawal-shared-1';
    const a = await submit(t.db, tenantA, withdrawal({ withdrawalId: 'shared-1' }), key);
    const b = await submit(t.db, tenantB, withdrawal({ withdrawalId: 'shared-1', amountMinor: '7' }), key);
    expect(a.outcome).toBe('CREATED');
    expect(b.outcome).toBe('CREATED');
    expect(a.operation.operationId).not.toBe(b.operation.operationId);
    // Each tenant's replay returns its own operation.
    const replayB = await submit(
      t.db,
      tenantB,
      withdrawal({ withdrawalId: 'shared-1', amountMinor: '7', destination: b.operation.destination ?? '' }),
      key,
    );
    expect(replayB.outcome).toBe('REPLAYED');
    expect(replayB.operation.operationId).toBe(b.operation.operationId);
    // Under tenant B's scope, tenant A's operation does not exist.
    const seenByB = await withTenant(t.db, tenantB, (tx) => findByKey(tx, tenantA, key));
    expect(seenByB).toBeNull();
  });

  it('C03 same key and same payload replays the first outcome without executing again', async () => {
    const request = withdrawal();
    const key = `withdrawal-${request.withdrawalId}`;
    const first = await submit(t.db, tenantA, request, key);
    const before = await balanceOf(t.db, tenantA, 'acct-1');
    const again = await submit(t.db, tenantA, request, key);
    expect(first.outcome).toBe('CREATED');
    expect(again.outcome).toBe('REPLAYED');
    expect(again.operation.operationId).toBe(first.operation.operationId);
    expect(await balanceOf(t.db, tenantA, 'acct-1')).toEqual(before);
  });

  it('C03 a replay returns the first rejection too', async () => {
    const request = withdrawal({ accountId: 'acct-poor', amountMinor: '5' });
    const key = `withdrawal-${request.withdrawalId}`;
    const first = await submit(t.db, tenantA, request, key);
    expect(first.operation.state).toBe('REJECTED');
    expect(first.operation.rejectionCode).toBe('INSUFFICIENT_FUNDS');
    // Funds arrive later: the same key still answers with the stored rejection.
    await fund(t.db, tenantA, 'acct-poor', 'ETH', 100n);
    const again = await submit(t.db, tenantA, request, key);
    expect(again.outcome).toBe('REPLAYED');
    expect(again.operation.state).toBe('REJECTED');
    expect(await balanceOf(t.db, tenantA, 'acct-poor')).toEqual({ available: 100n, held: 0n });
  });

  it('C03 same key with a changed amount or destination is refused, never updated', async () => {
    const request = withdrawal();
    const key = `withdrawal-${request.withdrawalId}`;
    const first = await submit(t.db, tenantA, request, key);
    const changedAmount = await refusal(submit(t.db, tenantA, { ...request, amountMinor: '1' }, key));
    const changedDestination = await refusal(
      submit(t.db, tenantA, { ...request, destination: evmAddress() }, key),
    );
    expect(changedAmount.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(changedDestination.code).toBe('IDEMPOTENCY_CONFLICT');
    const stored = await withTenant(t.db, tenantA, (tx) =>
      getOperation(tx, tenantA, first.operation.operationId),
    );
    expect(stored.amountMinor).toBe(request.amountMinor);
    expect(stored.destination).toBe(request.destination);
  });

  it('C04 a second key for a claimed withdrawal is refused, names the holder, and leaves no trace', async () => {
    const request = withdrawal();
    await submit(t.db, tenantA, request, 'req-1-for-claim');
    const countBefore = await operationCount(tenantA);
    const workBefore = await t.db.select({ n: sql<number>`count(*)::int` }).from(workItems);
    const balanceBefore = await balanceOf(t.db, tenantA, 'acct-1');

    const conflict = await refusal(submit(t.db, tenantA, request, 'req-2-second-client'));
    expect(conflict.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(conflict.details.holderKey).toBe('req-1-for-claim');
    expect(conflict.message).toContain('req-1-for-claim');

    expect(await operationCount(tenantA)).toBe(countBefore);
    expect(await withTenant(t.db, tenantA, (tx) => findByKey(tx, tenantA, 'req-2-second-client'))).toBeNull();
    expect(await t.db.select({ n: sql<number>`count(*)::int` }).from(workItems)).toEqual(workBefore);
    expect(await balanceOf(t.db, tenantA, 'acct-1')).toEqual(balanceBefore);
  });

  it('C05 after a send that raised, a retry with the key gets IN_FLIGHT and nothing is sent again', async () => {
    const request = withdrawal();
    const key = `withdrawal-${request.withdrawalId}`;
    const created = await submit(t.db, tenantA, request, key);
    const balanceBefore = await balanceOf(t.db, tenantA, 'acct-1');
    const send = async () => {
      throw new Error('socket hang up after the request was written');
    };
    // Approve, claim, sign: the path a worker takes.
    await withTenant(t.db, tenantA, async (tx) => {
      const approved = await approveWithdrawal(tx, created.operation);
      const claimed = await leaseForSigning(tx, { operation: approved, workerId: 'w1', leaseMs: 30_000 });
      if (!claimed) throw new Error('claim failed');
      const signed = await recordSigned(tx, {
        tenantId: tenantA,
        operationId: approved.operationId,
        leaseGeneration: claimed.leaseGeneration,
        signedArtifact: '0xdeadbeef',
        txHash: '0x01',
        workerId: 'w1',
      });
      try {
        await send();
      } catch (error) {
        await transition(tx, signed, 'UNKNOWN', {
          actor: 'w1',
          reason: `send raised: ${(error as Error).message}`,
        });
      }
    });
    const countBefore = await operationCount(tenantA);
    const workBefore = await t.db.select({ n: sql<number>`count(*)::int` }).from(workItems);
    const retry = await refusal(submit(t.db, tenantA, request, key));
    expect(retry.code).toBe('IN_FLIGHT');
    expect(retry.details.retryAfterMs).toBeGreaterThan(0);
    const otherKey = await refusal(submit(t.db, tenantA, request, 'a-different-key'));
    expect(otherKey.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(otherKey.details.holderKey).toBe(key);
    // Nothing new to send: no operation, no work item (a dispatch would be a second send).
    expect(await operationCount(tenantA)).toBe(countBefore);
    expect(await t.db.select({ n: sql<number>`count(*)::int` }).from(workItems)).toEqual(workBefore);
    // The key stays claimed and the hold stays in place while the outcome is unknown.
    const op = await withTenant(t.db, tenantA, (tx) =>
      getOperation(tx, tenantA, created.operation.operationId),
    );
    expect(op.state).toBe('UNKNOWN');
    expect(await balanceOf(t.db, tenantA, 'acct-1')).toEqual(balanceBefore);
  });

  it('C06 two keys with the same destination and amount are two operations', async () => {
    const destination = evmAddress();
    const one = await submit(t.db, tenantA, withdrawal({ destination, amountMinor: '1000' }), 'intent-one');
    const two = await submit(t.db, tenantA, withdrawal({ destination, amountMinor: '1000' }), 'intent-two');
    expect(one.outcome).toBe('CREATED');
    expect(two.outcome).toBe('CREATED');
    expect(one.operation.operationId).not.toBe(two.operation.operationId);
    expect(two.operation.state).toBe('REQUESTED');
  });
});

describe('bad input is refused with VALIDATION and writes nothing', () => {
  const cases: [string, Record<string, unknown>, unknown][] = [
    ['a float amount', { amountMinor: '1.5' }, 'k-float'],
    ['an exponent', { amountMinor: '1e18' }, 'k-exp'],
    ['a leading zero', { amountMinor: '0100' }, 'k-lead'],
    ['a negative amount', { amountMinor: '-5' }, 'k-neg'],
    ['zero', { amountMinor: '0' }, 'k-zero'],
    ['79 digits', { amountMinor: '1'.repeat(79) }, 'k-long'],
    ['a number instead of a string', { amountMinor: 5 }, 'k-num'],
    ['an unknown asset', { asset: 'DOGE' }, 'k-asset'],
    [
      'an EVM address with a broken checksum',
      { destination: '0x52908400098527886E0F7030069857D2E4169Ee7' },
      'k-cs',
    ],
    ['a bitcoin address for ETH', { destination: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq' }, 'k-net'],
    ['an unknown field', { surprise: true }, 'k-extra'],
  ];
  for (const [name, overrides, key] of cases) {
    it(`refuses ${name}`, async () => {
      const before = await operationCount(tenantA);
      const error = await refusal(submit(t.db, tenantA, { ...withdrawal(), ...overrides }, key));
      expect(error.code).toBe('VALIDATION');
      expect(await operationCount(tenantA)).toBe(before);
    });
  }

  it('C23 refuses keys that are empty, too long, or look like an e-mail address', async () => {
    for (const key of ['', 'x'.repeat(256), 'alice@example.com', 'has space']) {
      const error = await refusal(submit(t.db, tenantA, withdrawal(), key));
      expect(error.code).toBe('VALIDATION');
    }
  });

  it('accepts a valid bitcoin withdrawal and an 18-decimal amount beyond bigint range', async () => {
    await fund(t.db, tenantA, 'acct-big', 'ETH', 10n ** 40n);
    const big = await submit(
      t.db,
      tenantA,
      withdrawal({ accountId: 'acct-big', amountMinor: (10n ** 39n).toString() }),
      'k-big',
    );
    expect(big.operation.state).toBe('REQUESTED');
    expect(await balanceOf(t.db, tenantA, 'acct-big')).toEqual({
      available: 10n ** 40n - 10n ** 39n,
      held: 10n ** 39n,
    });
    const btc = await submit(
      t.db,
      tenantA,
      withdrawal({
        asset: 'BTC',
        destination: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq',
        amountMinor: '1',
      }),
      'k-btc',
    );
    expect(btc.operation.state).toBe('REJECTED');
  });
});
