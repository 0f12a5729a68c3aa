import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import {
  balanceOf,
  ETH,
  fund,
  newTenant,
  provisionRiskPolicy,
  refusal,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/db/connect.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { submitWithdrawal } from '../src/operations/create-withdrawal.ts';

/**
 * `submitWithdrawal` is creation as one statement: the database function binds the tenant and the
 * restricted role itself and checks the caller's copy of the asset's network and policy version.
 */
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

type DatabaseError = { code?: string; cause?: { code?: string } };

async function countWithdrawals(tenantId: string): Promise<number> {
  const [row] = rowsOf<{ n: number }>(
    await t.db.execute(
      sql`select count(*)::int as n from operations where tenant_id = ${tenantId} and kind = 'withdrawal'`,
    ),
  );
  return row?.n ?? -1;
}

describe('withdrawal creation in one statement', () => {
  it('C01 binds the tenant it is given: the same key in two tenants makes two operations', async () => {
    const key = 'withdrawal-one-statement-shared';
    // One connection, so the check afterwards reads the very session both statements ran on.
    const single = t.url ? await openDatabase({ url: t.url, maxConnections: 1 }) : null;
    const db = single?.db ?? t.db;
    try {
      const a = await submitWithdrawal(db, {
        tenantId: tenantA,
        request: withdrawal({ withdrawalId: 'one-statement-shared' }),
        idempotencyKey: key,
      });
      const b = await submitWithdrawal(db, {
        tenantId: tenantB,
        request: withdrawal({ withdrawalId: 'one-statement-shared', amountMinor: '9' }),
        idempotencyKey: key,
      });
      expect([a.outcome, b.outcome]).toEqual(['CREATED', 'CREATED']);
      expect(a.operation.tenantId).toBe(tenantA);
      expect(b.operation.tenantId).toBe(tenantB);
      // The binding was local to each statement's transaction: nothing lingers on the connection.
      const [session] = rowsOf<{ tenant: string | null; role: string }>(
        await db.execute(sql`select current_setting('app.tenant_id', true) as tenant, current_user as role`),
      );
      expect(session?.tenant ?? '').toBe('');
      expect(session?.role).not.toBe('idem_app');
    } finally {
      await single?.close();
    }
  });

  it('C01 refuses to re-bind a transaction already bound to another tenant, and writes nothing', async () => {
    const before = await countWithdrawals(tenantB);
    const error = await withTenant(t.db, tenantA, (tx) =>
      tx.execute(sql`select * from idem_create_withdrawal(
        ${tenantB}::uuid, gen_random_uuid(), 'withdrawal-cross', 'cross', 'acct-1', 'ETH', 'ethereum',
        '0x52908400098527886E0F7030069857D2E4169EE7', null, 1::numeric, null, 1, 'h', 'test')`),
    ).then(
      () => null,
      (caught: unknown) => caught as DatabaseError,
    );
    // The driver may hand the database error over directly or wrapped by the ORM.
    expect(error?.code ?? error?.cause?.code).toBe('42501');
    expect(await countWithdrawals(tenantB)).toBe(before);
  });

  it('C03 replays the same key and payload, and refuses a changed payload under that key', async () => {
    const request = withdrawal();
    const key = `withdrawal-${request.withdrawalId}`;
    const first = await submitWithdrawal(t.db, { tenantId: tenantA, request, idempotencyKey: key });
    const balance = await balanceOf(t.db, tenantA, 'acct-1');
    const again = await submitWithdrawal(t.db, { tenantId: tenantA, request, idempotencyKey: key });
    expect(first.outcome).toBe('CREATED');
    expect(again.outcome).toBe('REPLAYED');
    expect(again.operation.operationId).toBe(first.operation.operationId);
    const changed = await refusal(
      submitWithdrawal(t.db, {
        tenantId: tenantA,
        request: { ...request, amountMinor: '1' },
        idempotencyKey: key,
      }),
    );
    expect(changed.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(await balanceOf(t.db, tenantA, 'acct-1')).toEqual(balance);
  });

  it('C04 a second key for a claimed withdrawal id is refused naming the holding key', async () => {
    const request = withdrawal();
    await submitWithdrawal(t.db, {
      tenantId: tenantA,
      request,
      idempotencyKey: `withdrawal-${request.withdrawalId}`,
    });
    const before = await countWithdrawals(tenantA);
    const error = await refusal(
      submitWithdrawal(t.db, { tenantId: tenantA, request, idempotencyKey: 'another-key' }),
    );
    expect(error.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(error.details?.holderKey).toBe(`withdrawal-${request.withdrawalId}`);
    expect(await countWithdrawals(tenantA)).toBe(before);
  });

  it('hashes the current policy version and network even after they change under a running process', async () => {
    const tenant = await newTenant(t.db, 'Gamma');
    await fund(t.db, tenant, 'acct-1', 'ETH', ETH);
    const first = await submitWithdrawal(t.db, {
      tenantId: tenant,
      request: withdrawal(),
      idempotencyKey: 'k-before',
    });
    expect(first.operation.policyVersion).toBe(1);
    // The process keeps a copy of the context; the database holds the truth. A change of the
    // risk rules is what moves the version (I11-F6).
    await provisionRiskPolicy(t.db, {
      tenantId: tenant,
      assetCode: 'ETH',
      autoApproveMaxMinor: '1',
      fourEyesMinMinor: '2',
      actor: 'test',
    });
    const second = await submitWithdrawal(t.db, {
      tenantId: tenant,
      request: withdrawal(),
      idempotencyKey: 'k-after',
    });
    expect(second.outcome).toBe('CREATED');
    expect(second.operation.policyVersion).toBe(2);
    // An asset moved to another network: the copied network is refused, the request validated anew.
    await t.db.execute(
      sql`update assets set network = 'bitcoin' where tenant_id = ${tenant} and code = 'ETH'`,
    );
    const moved = await refusal(
      submitWithdrawal(t.db, { tenantId: tenant, request: withdrawal(), idempotencyKey: 'k-moved' }),
    );
    expect(moved.code).toBe('VALIDATION');
    expect(moved.message).toMatch(/not a valid bitcoin address/);
    expect(await countWithdrawals(tenant)).toBe(2);
  });

  it('an unknown asset is a VALIDATION error that writes nothing', async () => {
    const before = await countWithdrawals(tenantA);
    const error = await refusal(
      submitWithdrawal(t.db, {
        tenantId: tenantA,
        request: withdrawal({ asset: 'DOGE' }),
        idempotencyKey: 'k-doge',
      }),
    );
    expect(error.code).toBe('VALIDATION');
    expect(await countWithdrawals(tenantA)).toBe(before);
  });

  it('C03 C08 100 concurrent submissions of one key make one operation and exactly one hold', async () => {
    const tenant = await newTenant(t.db, 'Storm');
    await fund(t.db, tenant, 'acct-1', 'ETH', ETH);
    const request = withdrawal({ amountMinor: (ETH / 4n).toString() });
    const key = `withdrawal-${request.withdrawalId}`;
    const results = await Promise.allSettled(
      Array.from({ length: 100 }, () =>
        submitWithdrawal(t.db, { tenantId: tenant, request, idempotencyKey: key }),
      ),
    );
    const answers = results.map((r) => (r.status === 'fulfilled' ? r.value.outcome : String(r.reason)));
    expect(answers.filter((a) => a === 'CREATED')).toHaveLength(1);
    expect(answers.filter((a) => a !== 'CREATED' && a !== 'REPLAYED')).toEqual([]);
    expect(await countWithdrawals(tenant)).toBe(1);
    expect(await balanceOf(t.db, tenant, 'acct-1')).toEqual({ available: (ETH * 3n) / 4n, held: ETH / 4n });
  });
});
