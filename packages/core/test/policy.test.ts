import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import {
  balanceOf,
  databaseRefusal,
  ETH,
  fund,
  newTenant,
  provisionRiskPolicy,
  refusal,
  submit,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../src/db/connect.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { submitWithdrawal } from '../src/operations/create-withdrawal.ts';
import { creditAsOperator } from '../src/operations/record-credit.ts';
import { policyHistory } from '../src/risk/policy-history.ts';
import { setRiskPolicy } from '../src/risk/review.ts';

/**
 * Policy versions (I11-F6): the tenant's policy version is part of every payload hash, so changing the
 * risk rules must move it (once per real change, with an append-only record of what changed), and a
 * retry of an existing key must be judged against the stored operation's own version.
 */
let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.dispose());

const ETH_RULES = { assetCode: 'ETH', autoApproveMaxMinor: '100', fourEyesMinMinor: '1000' };

/** The rules set as the deployment's tools set them; versioning does not care who may loosen them. */
function setRules(
  db: Database,
  tenantId: string,
  rules: Partial<typeof ETH_RULES> & Record<string, unknown>,
) {
  return provisionRiskPolicy(db, { tenantId, ...ETH_RULES, actor: 'staff:risk-officer', ...rules });
}

async function versionOf(tenantId: string): Promise<number> {
  const [row] = rowsOf<{ v: number }>(
    await t.db.execute(sql`select policy_version as v from tenants where tenant_id = ${tenantId}`),
  );
  return row?.v ?? -1;
}

async function historyCount(tenantId: string): Promise<number> {
  const [row] = rowsOf<{ n: number }>(
    await t.db.execute(sql`select count(*)::int as n from policy_history where tenant_id = ${tenantId}`),
  );
  return row?.n ?? -1;
}

describe('I11-F6 policy versions', () => {
  it('I11-F6 a real change of the risk rules bumps the version once; a no-op set changes nothing', async () => {
    const tenantId = await newTenant(t.db, 'Versions');
    expect(await versionOf(tenantId)).toBe(1);

    const first = await setRules(t.db, tenantId, {});
    expect(first).toEqual({ changed: true, policyVersion: 2 });
    expect(await versionOf(tenantId)).toBe(2);

    // The same rules again (defaults included): nothing changes, not even the history.
    const again = await setRules(t.db, tenantId, { velocityMaxPerHour: 10, similarWindowMinutes: 60 });
    expect(again).toEqual({ changed: false, policyVersion: 2 });
    expect(await versionOf(tenantId)).toBe(2);
    expect(await historyCount(tenantId)).toBe(1);

    // An approval threshold is policy too.
    expect(await setRules(t.db, tenantId, { fourEyesMinMinor: '999' })).toEqual({
      changed: true,
      policyVersion: 3,
    });
    // Another asset's rules move the same tenant-wide version.
    expect(await setRules(t.db, tenantId, { assetCode: 'BTC' })).toEqual({ changed: true, policyVersion: 4 });
    expect(await historyCount(tenantId)).toBe(3);

    // In the same transaction (the application's, tightening): a change that rolls back leaves
    // neither a bump nor a record.
    await expect(
      withTenant(t.db, tenantId, async (tx) => {
        await setRiskPolicy(tx, {
          tenantId,
          ...ETH_RULES,
          autoApproveMaxMinor: '7',
          fourEyesMinMinor: '999',
          actor: 'staff:x',
        });
        throw new Error('abandoned');
      }),
    ).rejects.toThrow('abandoned');
    expect(await versionOf(tenantId)).toBe(4);
    expect(await historyCount(tenantId)).toBe(3);
  });

  it('I11-F6 an identical retry after a policy change replays, on both creation paths', async () => {
    const tenantId = await newTenant(t.db, 'Retry');
    await fund(t.db, tenantId, 'acct-1', 'ETH', 10n * ETH);
    // One request through the API's one-statement path (its per-process copy of the version goes
    // stale), one through a caller's transaction (the web screens' path).
    const viaApi = withdrawal();
    const viaTx = withdrawal();
    const createdApi = await submitWithdrawal(t.db, { tenantId, request: viaApi, idempotencyKey: 'k-api' });
    const createdTx = await submit(t.db, tenantId, viaTx, 'k-tx');
    expect(createdApi.operation.policyVersion).toBe(1);
    expect(createdTx.operation.policyVersion).toBe(1);
    const balance = await balanceOf(t.db, tenantId, 'acct-1');

    await setRules(t.db, tenantId, {});
    expect(await versionOf(tenantId)).toBe(2);

    const replayApi = await submitWithdrawal(t.db, { tenantId, request: viaApi, idempotencyKey: 'k-api' });
    expect(replayApi.outcome).toBe('REPLAYED');
    expect(replayApi.operation.operationId).toBe(createdApi.operation.operationId);
    expect(replayApi.operation.policyVersion).toBe(1);
    const replayTx = await submit(t.db, tenantId, viaTx, 'k-tx');
    expect(replayTx.outcome).toBe('REPLAYED');
    expect(replayTx.operation.operationId).toBe(createdTx.operation.operationId);
    expect(await balanceOf(t.db, tenantId, 'acct-1')).toEqual(balance);

    // A new withdrawal is hashed with the new version.
    const fresh = await submitWithdrawal(t.db, { tenantId, request: withdrawal(), idempotencyKey: 'k-new' });
    expect(fresh.outcome).toBe('CREATED');
    expect(fresh.operation.policyVersion).toBe(2);
  });

  it('I11-F6 a changed amount after a bump still conflicts, and a second key for the same id too', async () => {
    const tenantId = await newTenant(t.db, 'Changed');
    await fund(t.db, tenantId, 'acct-1', 'ETH', 10n * ETH);
    const request = withdrawal();
    await submitWithdrawal(t.db, { tenantId, request, idempotencyKey: 'k-1' });
    await setRules(t.db, tenantId, {});
    const balance = await balanceOf(t.db, tenantId, 'acct-1');

    const changed = { ...request, amountMinor: (ETH / 5n).toString() };
    // Thunks, so each attempt starts only when awaited (no unhandled rejection meanwhile).
    for (const attempt of [
      () => submitWithdrawal(t.db, { tenantId, request: changed, idempotencyKey: 'k-1' }),
      () => submit(t.db, tenantId, changed, 'k-1'),
    ]) {
      const error = await refusal(attempt());
      expect(error.code).toBe('IDEMPOTENCY_CONFLICT');
      expect(error.details?.holderKey).toBeUndefined();
    }
    const otherKey = await refusal(submitWithdrawal(t.db, { tenantId, request, idempotencyKey: 'k-2' }));
    expect(otherKey.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(otherKey.details?.holderKey).toBe('k-1');
    expect(await balanceOf(t.db, tenantId, 'acct-1')).toEqual(balance);
  });

  it('I11-F6 a deposit retried after a policy change replays; a changed one conflicts', async () => {
    const tenantId = await newTenant(t.db, 'Deposits');
    const deposit = { reference: 'chain-tx-1:0', accountId: 'acct-1', asset: 'ETH', amountMinor: '500' };
    const record = (amountMinor: string) =>
      creditAsOperator(t.db, {
        tenantId,
        deposit: { ...deposit, amountMinor },
        idempotencyKey: 'dep-1',
        actor: 'test',
      });
    const created = await record('500');
    await setRules(t.db, tenantId, {});
    const replay = await record('500');
    expect(replay.outcome).toBe('REPLAYED');
    expect(replay.operation.operationId).toBe(created.operation.operationId);
    expect((await refusal(record('501'))).code).toBe('IDEMPOTENCY_CONFLICT');
    expect(await balanceOf(t.db, tenantId, 'acct-1')).toEqual({ available: 500n, held: 0n });
  });

  it.skipIf(!onPostgres)(
    'I11-F6 concurrent policy changes get distinct versions, each with its own history row (real PG)',
    async () => {
      const tenantId = await newTenant(t.db, 'Concurrent');
      // Eight sessions at once: four on one asset, four on others, every one a real change.
      const changes = Array.from({ length: 8 }, (_, i) => ({
        assetCode: ['ETH', 'BTC', 'USDC', 'ETH'][i % 4] as string,
        autoApproveMaxMinor: String(1000 + i),
      }));
      const results = await Promise.all(changes.map((change) => setRules(t.db, tenantId, change)));
      expect(results.every((r) => r.changed)).toBe(true);
      expect(results.map((r) => r.policyVersion).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7, 8, 9]);
      expect(await versionOf(tenantId)).toBe(9);
      const history = await withTenant(t.db, tenantId, (tx) => policyHistory(tx, tenantId));
      expect(history.map((h) => [h.fromVersion, h.toVersion])).toEqual(
        [2, 3, 4, 5, 6, 7, 8, 9].map((v) => [v - 1, v]),
      );
      // The chain is unbroken: each change's "before" is the state the previous one left behind.
      const last = new Map<string, unknown>();
      for (const entry of history) {
        expect(entry.before).toEqual(last.get(entry.assetCode ?? '') ?? null);
        last.set(entry.assetCode ?? '', entry.after);
      }
    },
  );

  it('I11-F6 the history records who, when and what changed; it is tenant-scoped and append-only, for the app role and the owner', async () => {
    const tenantId = await newTenant(t.db, 'History');
    const neighbour = await newTenant(t.db, 'Neighbour');
    await setRules(t.db, tenantId, { actor: 'staff:alice' });
    await setRules(t.db, tenantId, { autoApproveMaxMinor: (50n * ETH).toString(), actor: 'cli:bob' });

    const history = await withTenant(t.db, tenantId, (tx) => policyHistory(tx, tenantId));
    expect(history).toHaveLength(2);
    expect(history[0]).toMatchObject({
      fromVersion: 1,
      toVersion: 2,
      policy: 'risk',
      assetCode: 'ETH',
      actor: 'staff:alice',
      before: null,
      after: {
        asset_code: 'ETH',
        auto_approve_max_minor: '100',
        four_eyes_min_minor: '1000',
        velocity_max_per_hour: '10',
        similar_window_minutes: '60',
      },
    });
    expect(history[0]?.changedAt).toBeInstanceOf(Date);
    // Amounts beyond 2^53 survive exactly: the record keeps numbers as decimal strings.
    expect(history[1]).toMatchObject({
      fromVersion: 2,
      toVersion: 3,
      actor: 'cli:bob',
      before: history[0]?.after,
      after: { ...history[0]?.after, auto_approve_max_minor: (50n * ETH).toString() },
    });
    expect(await withTenant(t.db, neighbour, (tx) => policyHistory(tx, tenantId))).toEqual([]);

    // The restricted application role can read the history but not write, change or remove it,
    // and cannot move the version by hand.
    for (const statement of [
      sql`update policy_history set actor = 'someone-else'`,
      sql`delete from policy_history`,
      sql`insert into policy_history (tenant_id, from_version, to_version, policy, asset_code, actor)
          values (${tenantId}, 3, 4, 'risk', 'ETH', 'forger')`,
      sql`update tenants set policy_version = policy_version + 1`,
      sql`update tenants set policy_version = 1`,
    ]) {
      expect(await databaseRefusal(withTenant(t.db, tenantId, (tx) => tx.execute(statement)))).toMatch(
        /permission denied|append-only/,
      );
    }
    // The owner (t.db is the owning connection) is bound by the triggers as well.
    for (const statement of [
      sql`update policy_history set actor = 'someone-else'`,
      sql`delete from policy_history`,
      sql`truncate policy_history`,
    ]) {
      expect(await databaseRefusal(t.db.execute(statement))).toMatch(/append-only/);
    }
    // A version moves one step at a time and only with its history row.
    expect(
      await databaseRefusal(
        t.db.execute(sql`update tenants set policy_version = 1 where tenant_id = ${tenantId}`),
      ),
    ).toMatch(/policy version/);
    expect(
      await databaseRefusal(
        t.db.execute(
          sql`update tenants set policy_version = policy_version + 1 where tenant_id = ${tenantId}`,
        ),
      ),
    ).toMatch(/policy version/);
    // A change of the rules that names no actor is refused, whoever writes it.
    expect(
      await databaseRefusal(
        withTenant(t.db, tenantId, (tx) =>
          tx.execute(sql`update risk_policies set four_eyes_min_minor = 1 where asset_code = 'ETH'`),
        ),
      ),
    ).toMatch(/actor/);
    // The versioning function writes as its owner, so the application role may not attach it to
    // a table of its own to forge another tenant's version.
    expect(
      await databaseRefusal(
        withTenant(t.db, tenantId, async (tx) => {
          await tx.execute(sql`create temp table forged (tenant_id uuid, asset_code text)`);
          await tx.execute(
            sql`create trigger forged_versions after insert on forged
                for each row execute function idem_record_policy_change()`,
          );
        }),
      ),
    ).toMatch(
      // Today the function's privilege refuses it; once TEMP is revoked (finding 8), the table.
      /permission denied (for function idem_record_policy_change|to create temporary tables)/,
    );
    expect(await versionOf(tenantId)).toBe(3);
    expect(await historyCount(tenantId)).toBe(2);
  });
});
