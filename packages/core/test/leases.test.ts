import { createTestDatabase, expireLease, type TestDatabase } from '@idem/testing/database';
import {
  approveWithdrawal,
  databaseRefusal,
  ETH,
  fund,
  newTenant,
  refusal,
  submit,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../src/db/tenant-scope.ts';
import { getOperation, type Operation } from '../src/operations/operation-record.ts';
import { leaseForSigning, recordSigned, releaseLease } from '../src/state-machine/lease.ts';

let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase({ maxConnections: 20 });
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-1', 'ETH', 100n * ETH);
});
afterAll(() => t.dispose());

async function approvedWithdrawal(): Promise<Operation> {
  const created = await submit(t.db, tenantId, withdrawal(), `k-${Math.random().toString(36).slice(2)}`);
  return withTenant(t.db, tenantId, (tx) => approveWithdrawal(tx, created.operation));
}

function tryLease(op: Operation, workerId: string, leaseMs = 30_000) {
  return withTenant(t.db, tenantId, (tx) => leaseForSigning(tx, { operation: op, workerId, leaseMs }));
}

describe('leases', () => {
  it('C09 exactly one of 50 concurrent workers claims the operation', async () => {
    const op = await approvedWithdrawal();
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => tryLease(op, `worker-${i}`)));
    const winners = results.filter((r) => r !== null);
    expect(winners).toHaveLength(1);
    const stored = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    expect(stored.state).toBe('SIGNING');
    expect(stored.leaseOwner).toBe(winners[0]?.operation.leaseOwner);
    expect(stored.leaseGeneration).toBe(1);
  });

  it('C09 a claim with a payload hash that is not the approved one matches nothing', async () => {
    const op = await approvedWithdrawal();
    const forged = { ...op, payloadHash: 'f'.repeat(64) };
    expect(await tryLease(forged, 'worker-x')).toBeNull();
  });

  it('C09 a claim from a stale read matches nothing, even once the state is APPROVED again', async () => {
    const op = await approvedWithdrawal();
    const first = await tryLease(op, 'worker-a');
    await withTenant(t.db, tenantId, (tx) =>
      releaseLease(tx, {
        tenantId,
        operationId: op.operationId,
        leaseGeneration: first?.leaseGeneration ?? 0,
        workerId: 'worker-a',
        reason: 'shutting down',
      }),
    );
    // Same state and payload hash as `op`, but two versions later: only the version tells them apart.
    expect(await tryLease(op, 'worker-stale')).toBeNull();
    const stored = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    expect([stored.state, stored.leaseOwner]).toEqual(['APPROVED', null]);
  });

  it('C09 a stale lease generation cannot record a signature after the lease was reclaimed', async () => {
    const op = await approvedWithdrawal();
    const first = await tryLease(op, 'worker-slow', 1);
    expect(first).not.toBeNull();
    // The 1 ms lease has run out: moved back on the database's clock rather than waited for.
    await expireLease(t.db, op.operationId);
    const current = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    const second = await tryLease(current, 'worker-fast');
    expect(second?.leaseGeneration).toBe((first?.leaseGeneration ?? 0) + 1);
    const stale = await refusal(
      withTenant(t.db, tenantId, (tx) =>
        recordSigned(tx, {
          tenantId,
          operationId: op.operationId,
          leaseGeneration: first?.leaseGeneration ?? 0,
          signedArtifact: '0xstale',
          txHash: '0xstale',
          workerId: 'worker-slow',
        }),
      ),
    );
    expect(stale.code).toBe('STALE_WRITE');
    const signed = await withTenant(t.db, tenantId, (tx) =>
      recordSigned(tx, {
        tenantId,
        operationId: op.operationId,
        leaseGeneration: second?.leaseGeneration ?? 0,
        signedArtifact: '0xfresh',
        txHash: '0xfreshhash',
        workerId: 'worker-fast',
      }),
    );
    expect(signed.state).toBe('SIGNED');
    expect(signed.signedArtifact).toBe('0xfresh');
  });

  it('I11-F10 C09 the same worker id restarted: its paused predecessor cannot release the new lease', async () => {
    // A worker restarted with the same --id reclaims the expired lease while its predecessor is
    // paused. Owner and (re-read) version match; only the lease generation tells them apart.
    const op = await approvedWithdrawal();
    const paused = await tryLease(op, 'worker-same', 1);
    expect(paused).not.toBeNull();
    // The 1 ms lease has run out: moved back on the database's clock rather than waited for.
    await expireLease(t.db, op.operationId);
    const current = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    const restarted = await tryLease(current, 'worker-same');
    expect(restarted?.leaseGeneration).toBe((paused?.leaseGeneration ?? 0) + 1);
    const before = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    // The predecessor wakes and gives "its" claim back, re-reading the row first as releaseLease does.
    const stale = await refusal(
      withTenant(t.db, tenantId, (tx) =>
        releaseLease(tx, {
          tenantId,
          operationId: op.operationId,
          leaseGeneration: paused?.leaseGeneration ?? 0,
          workerId: 'worker-same',
          reason: 'shutting down',
        }),
      ),
    );
    expect(stale.code).toBe('STALE_WRITE');
    const after = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    expect(after).toEqual(before);
    expect([after.state, after.leaseOwner, after.leaseGeneration]).toEqual([
      'SIGNING',
      'worker-same',
      restarted?.leaseGeneration,
    ]);
  });

  it('I11-F10 C12 the same worker id restarted: its paused predecessor cannot record a signature', async () => {
    const op = await approvedWithdrawal();
    const paused = await tryLease(op, 'worker-same', 1);
    expect(paused).not.toBeNull();
    // The 1 ms lease has run out: moved back on the database's clock rather than waited for.
    await expireLease(t.db, op.operationId);
    const current = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    const restarted = await tryLease(current, 'worker-same');
    expect(restarted?.leaseGeneration).toBe((paused?.leaseGeneration ?? 0) + 1);
    const before = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    const stale = await refusal(
      withTenant(t.db, tenantId, (tx) =>
        recordSigned(tx, {
          tenantId,
          operationId: op.operationId,
          leaseGeneration: paused?.leaseGeneration ?? 0,
          signedArtifact: '0xstale',
          txHash: '0xstale',
          workerId: 'worker-same',
        }),
      ),
    );
    expect(stale.code).toBe('STALE_WRITE');
    const after = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    expect(after).toEqual(before);
    expect(after.signedArtifact).toBeNull();
    // The restarted holder, with its own generation, signs as usual.
    const signed = await withTenant(t.db, tenantId, (tx) =>
      recordSigned(tx, {
        tenantId,
        operationId: op.operationId,
        leaseGeneration: restarted?.leaseGeneration ?? 0,
        signedArtifact: '0xfresh',
        txHash: '0xfreshhash',
        workerId: 'worker-same',
      }),
    );
    expect([signed.state, signed.signedArtifact]).toEqual(['SIGNED', '0xfresh']);
  });

  it('C12 an expired lease is not reclaimable once something is signed', async () => {
    const op = await approvedWithdrawal();
    const claimed = await tryLease(op, 'worker-a', 1);
    // Sign while still in SIGNING, then let the lease expire, and simulate a crash before the
    // SIGNED transition is visible to others by reading the SIGNING row as a competitor would.
    const signed = await withTenant(t.db, tenantId, (tx) =>
      recordSigned(tx, {
        tenantId,
        operationId: op.operationId,
        leaseGeneration: claimed?.leaseGeneration ?? 0,
        signedArtifact: '0xbytes',
        txHash: '0xhash',
        workerId: 'worker-a',
      }),
    );
    // The 1 ms lease has run out: moved back on the database's clock rather than waited for.
    await expireLease(t.db, op.operationId);
    // A competitor holding the old SIGNING snapshot cannot claim: version and artifact both stop it.
    expect(await tryLease(claimed?.operation as Operation, 'worker-b')).toBeNull();
    // Nor can anyone claim the SIGNED row itself.
    expect(await tryLease(signed, 'worker-b')).toBeNull();
    const stored = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    expect(stored.signedArtifact).toBe('0xbytes');
    expect(stored.leaseOwner).toBe('worker-a');
  });

  it('C12 the database refuses to overwrite stored signed bytes, whatever the caller', async () => {
    const op = await approvedWithdrawal();
    const claimed = await tryLease(op, 'worker-a');
    await withTenant(t.db, tenantId, (tx) =>
      recordSigned(tx, {
        tenantId,
        operationId: op.operationId,
        leaseGeneration: claimed?.leaseGeneration ?? 0,
        signedArtifact: '0xoriginal',
        txHash: '0xoriginalhash',
        workerId: 'worker-a',
      }),
    );
    const message = await databaseRefusal(
      t.db.execute(
        sql`update operations set signed_artifact = '0xother', version = version + 1 where operation_id = ${op.operationId}`,
      ),
    );
    expect(message).toMatch(/already signed/);
  });

  it('an unsigned claim can be released back to APPROVED and claimed again', async () => {
    const op = await approvedWithdrawal();
    const claimed = await tryLease(op, 'worker-a');
    const released = await withTenant(t.db, tenantId, (tx) =>
      releaseLease(tx, {
        tenantId,
        operationId: op.operationId,
        leaseGeneration: claimed?.leaseGeneration ?? 0,
        workerId: 'worker-a',
        reason: 'shutting down',
      }),
    );
    expect(released.state).toBe('APPROVED');
    expect(released.leaseOwner).toBeNull();
    const again = await tryLease(released, 'worker-b');
    expect(again?.leaseGeneration).toBe(2);
  });
});
