import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { fund, newTenant, strandWithdrawal, submit, withdrawal } from '@idem/testing/tenants';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../src/db/tenant-scope.ts';
import type { Operation } from '../src/operations/operation-record.ts';
import { listAttentionQueue } from '../src/staff/queries.ts';
import { assignOwner } from '../src/state-machine/assign-owner.ts';

let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-q', 'ETH', 10_000n);
});
afterAll(() => t.dispose());

const inTenant = <T>(work: Parameters<typeof withTenant<T>>[2]) => withTenant(t.db, tenantId, work);

async function requested(reference: string): Promise<Operation> {
  const created = await submit(
    t.db,
    tenantId,
    withdrawal({ withdrawalId: reference, accountId: 'acct-q', amountMinor: '10' }),
    `k-${reference}`,
  );
  return created.operation;
}

describe('the staff attention queues (stuck and unknown withdrawals)', () => {
  it('I12-SCREENS BROADCAST withdrawals come oldest broadcast first with their age since broadcast and the alert age; an owner change does not reset it; pages follow that order', async () => {
    // Created first, broadcast last: the queue orders by broadcast, not by creation.
    const early = await requested('q-created-first');
    const late = await requested('q-created-second');
    const lateSent = await inTenant((tx) => strandWithdrawal(tx, late, 'BROADCAST'));
    const earlySent = await inTenant((tx) => strandWithdrawal(tx, early, 'BROADCAST'));
    // Escalating the first broadcast one writes a history row in BROADCAST: its age must not restart.
    await inTenant((tx) =>
      assignOwner(tx, lateSent, { owner: 'treasury-oncall', actor: 'w', reason: 'not mined' }),
    );
    const lost = await requested('q-unknown');
    const unknown = await inTenant((tx) => strandWithdrawal(tx, lost, 'UNKNOWN'));

    const page = await inTenant((tx) =>
      listAttentionQueue(tx, tenantId, { state: 'BROADCAST', limit: 10, alertAfterMs: { ethereum: 90_000 } }),
    );
    expect(page.items.map((item) => item.reference)).toEqual(['q-created-second', 'q-created-first']);
    const [first, second] = page.items;
    expect(first?.owner).toBe('treasury-oncall');
    expect(first?.alertAfterSeconds).toBe(90);
    expect(first?.stateAgeSeconds).toBeGreaterThanOrEqual(0);
    expect(first?.stateAgeSeconds).toBeLessThan(60);
    // The state time is when it was broadcast, not the later owner change.
    expect(Date.parse(first?.stateSince ?? '')).toBeLessThanOrEqual(lateSent.updatedAt.getTime());
    expect(Date.parse(first?.stateSince ?? '')).toBeLessThan(Date.parse(second?.stateSince ?? ''));
    expect(Date.parse(second?.stateSince ?? '')).toBeLessThanOrEqual(earlySent.updatedAt.getTime());

    const one = await inTenant((tx) => listAttentionQueue(tx, tenantId, { state: 'BROADCAST', limit: 1 }));
    expect(one.items.map((item) => item.reference)).toEqual(['q-created-second']);
    expect(one.items[0]?.alertAfterSeconds).toBeNull();
    expect(one.nextCursor).not.toBeNull();
    const two = await inTenant((tx) =>
      listAttentionQueue(tx, tenantId, { state: 'BROADCAST', limit: 1, cursor: one.nextCursor ?? '' }),
    );
    expect(two.items.map((item) => item.reference)).toEqual(['q-created-first']);
    expect(two.nextCursor).toBeNull();

    // UNKNOWN ages too, and no alert age is claimed for them.
    const unknowns = await inTenant((tx) =>
      listAttentionQueue(tx, tenantId, { state: 'UNKNOWN', limit: 10, alertAfterMs: { ethereum: 1_000 } }),
    );
    expect(unknowns.items.map((item) => item.operationId)).toEqual([unknown.operationId]);
    expect(unknowns.items[0]?.alertAfterSeconds).toBeNull();
    expect(unknowns.items[0]?.stateAgeSeconds).toBeGreaterThanOrEqual(0);
  });

  it('I12-SCREENS a cursor the API did not return is refused', async () => {
    const forged = Buffer.from("2026-01-01'; drop table x|nope", 'utf8').toString('base64url');
    await expect(
      inTenant((tx) => listAttentionQueue(tx, tenantId, { state: 'BROADCAST', limit: 1, cursor: forged })),
    ).rejects.toMatchObject({ code: 'VALIDATION' });
  });
});
