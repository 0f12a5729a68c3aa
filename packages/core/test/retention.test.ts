import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { databaseRefusal, fund, newTenant, refusal, submit, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../src/db/tenant-scope.ts';
import { getOperation } from '../src/operations/operation-record.ts';
import { expireIdempotencyKeys } from '../src/retention/expire-keys.ts';
import { transition } from '../src/state-machine/transition.ts';

let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-1', 'ETH', 10_000n);
});
afterAll(() => t.dispose());

const expireAll = () =>
  withTenant(t.db, tenantId, (tx) =>
    expireIdempotencyKeys(tx, { tenantId, settledBefore: new Date(Date.now() + 60_000) }),
  );

describe('idempotency retention', () => {
  it('C07 the expiry job leaves the keys of non-terminal operations in place', async () => {
    const pendingRequest = withdrawal({ amountMinor: '10' });
    const pending = await submit(t.db, tenantId, pendingRequest, 'retained-pending');
    const rejectedRequest = withdrawal({ amountMinor: '10' });
    const rejected = await submit(t.db, tenantId, rejectedRequest, 'expires-rejected');
    await withTenant(t.db, tenantId, (tx) =>
      transition(tx, rejected.operation, 'REJECTED', { actor: 'staff', reason: 'risk' }),
    );

    // Even with a horizon in the future, only the settled operation's key expires.
    expect(await expireAll()).toBe(1);
    const kept = await withTenant(t.db, tenantId, (tx) =>
      getOperation(tx, tenantId, pending.operation.operationId),
    );
    expect(kept.idempotencyKey).toBe('retained-pending');
    const expired = await withTenant(t.db, tenantId, (tx) =>
      getOperation(tx, tenantId, rejected.operation.operationId),
    );
    expect(expired.idempotencyKey).toMatch(/^expired:[0-9a-f]{64}$/);

    // The pending key still replays.
    const replay = await submit(t.db, tenantId, pendingRequest, 'retained-pending');
    expect(replay.outcome).toBe('REPLAYED');
    // An expired key can never re-open its withdrawal: the reference stays claimed.
    const reopened = await refusal(submit(t.db, tenantId, rejectedRequest, 'expires-rejected'));
    expect(reopened.code).toBe('IDEMPOTENCY_CONFLICT');
  });

  it('C07 the database refuses to expire the key of an unsettled operation', async () => {
    const pending = await submit(t.db, tenantId, withdrawal({ amountMinor: '10' }), 'never-expires');
    const message = await databaseRefusal(
      t.db.execute(sql`
        update operations
           set idempotency_key = 'expired:' || encode(sha256(convert_to(idempotency_key, 'UTF8')), 'hex'),
               version = version + 1
         where operation_id = ${pending.operation.operationId}`),
    );
    expect(message).toMatch(/cannot change/);
  });
});
