import { payloadHash } from '@idem/contracts/payload';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import {
  approveWithdrawal,
  databaseRefusal,
  ETH,
  fund,
  newTenant,
  refusal,
  staffMember,
  submit,
  withdrawal,
} from '@idem/testing/tenants';
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  attemptHashes,
  feeCapInForce,
  leaseForReplacement,
  listAttempts,
  recordAttempt,
  requestFeeBump,
} from '../src/attempts/attempts.ts';
import { rowsOf } from '../src/db/rows.ts';
import { signedAttempts } from '../src/db/schema/index.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { getOperation, type Operation } from '../src/operations/operation-record.ts';
import { decideProposal } from '../src/proposals/decide.ts';
import { propose } from '../src/proposals/propose.ts';
import { leaseForSigning, recordSigned } from '../src/state-machine/lease.ts';
import { transition } from '../src/state-machine/transition.ts';

let t: TestDatabase;
let tenantId: string;
/** Approvers are real, active members: only their approvals count. */
let bob: string;
let nonce = 0;

beforeAll(async () => {
  t = await createTestDatabase({ maxConnections: 10 });
  tenantId = await newTenant(t.db);
  bob = await staffMember(t.db, tenantId, 'approver', 'bob@example.test');
  await fund(t.db, tenantId, 'acct-1', 'ETH', 100n * ETH);
});
afterAll(() => t.dispose());

const fees = { gasLimit: 21_000n, maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };
const hash = (n: number) => `0x${n.toString(16).padStart(64, '0')}`;

/** A withdrawal signed (attempt 1 recorded by recordSigned) and broadcast, as the worker leaves it. */
async function broadcastWithdrawal(): Promise<Operation> {
  const created = await submit(t.db, tenantId, withdrawal(), `k-${Math.random().toString(36).slice(2)}`);
  const myNonce = nonce++;
  return withTenant(t.db, tenantId, async (tx) => {
    const approved = await approveWithdrawal(tx, created.operation);
    const claimed = await leaseForSigning(tx, { operation: approved, workerId: 'w', leaseMs: 30_000 });
    if (!claimed) throw new Error('claim lost');
    const signed = await recordSigned(tx, {
      tenantId,
      operationId: approved.operationId,
      leaseGeneration: claimed.leaseGeneration,
      signedArtifact: `0xoriginal${myNonce}`,
      txHash: hash(1_000 + myNonce),
      chainNonce: myNonce,
      workerId: 'w',
      fees,
    });
    return transition(tx, signed, 'BROADCAST', { actor: 'w', reason: 'sent', set: { clearLease: true } });
  });
}

async function replace(
  op: Operation,
  kind: 'replacement' | 'cancel',
  txHash: string,
  nonceOf = op.chainNonce,
) {
  return withTenant(t.db, tenantId, async (tx) => {
    const current = await getOperation(tx, tenantId, op.operationId);
    const leased = await leaseForReplacement(tx, {
      operation: current,
      workerId: 'w2',
      leaseMs: 30_000,
      reason: 'test replacement',
    });
    if (!leased) throw new Error('lease lost');
    return recordAttempt(tx, {
      tenantId,
      operationId: op.operationId,
      leaseGeneration: leased.leaseGeneration,
      kind,
      signedArtifact: `0x${kind}${txHash.slice(-6)}`,
      txHash,
      nonce: nonceOf ?? -1,
      fees: { ...fees, maxFeePerGas: fees.maxFeePerGas * 2n },
      workerId: 'w2',
      requestedBy: 'policy',
    });
  });
}

describe('signed attempts (I12)', () => {
  it('I12-ATTEMPTS recordSigned keeps the original bytes on the operation and records them as attempt 1', async () => {
    const op = await broadcastWithdrawal();
    const attempts = await withTenant(t.db, tenantId, (tx) => listAttempts(tx, tenantId, op.operationId));
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({
      attemptNo: 1,
      kind: 'original',
      nonce: op.chainNonce,
      signedArtifact: op.signedArtifact,
      txHash: op.txHash,
      maxFeePerGas: '2000000000',
      maxPriorityFeePerGas: '1000000000',
      createdBy: 'w',
    });
  });

  it('I12-ATTEMPTS a replacement shares the nonce, is fenced by a new lease, and every hash is watched', async () => {
    const op = await broadcastWithdrawal();
    const second = await replace(op, 'replacement', hash(50_001));
    expect(second.attemptNo).toBe(2);
    const after = await withTenant(t.db, tenantId, (tx) => getOperation(tx, tenantId, op.operationId));
    // The original bytes stay where they were.
    expect(after.signedArtifact).toBe(op.signedArtifact);
    expect(after.txHash).toBe(op.txHash);
    expect(second.leaseGeneration).toBe(after.leaseGeneration);
    const hashes = await withTenant(t.db, tenantId, (tx) => attemptHashes(tx, tenantId, op.operationId));
    expect(hashes).toEqual([op.txHash, hash(50_001)]);
  });

  it('I12-ATTEMPTS the database refuses an attempt with another nonce (never a second transfer)', async () => {
    const op = await broadcastWithdrawal();
    const message = await databaseRefusal(replace(op, 'replacement', hash(50_002), (op.chainNonce ?? 0) + 1));
    expect(message).toMatch(/is not operation .*'s nonce/);
  });

  it('I12-ATTEMPTS the attempts table refuses UPDATE and DELETE, even by its owner', async () => {
    const op = await broadcastWithdrawal();
    const where = and(eq(signedAttempts.tenantId, tenantId), eq(signedAttempts.operationId, op.operationId));
    expect(
      await databaseRefusal(
        withTenant(t.db, tenantId, (tx) => tx.update(signedAttempts).set({ maxFeePerGas: '1' }).where(where)),
      ),
    ).toMatch(/append-only|permission denied/);
    expect(
      await databaseRefusal(
        t.db
          .update(signedAttempts)
          .set({ txHash: hash(9) })
          .where(where),
      ),
    ).toMatch(/append-only/);
    expect(await databaseRefusal(t.db.delete(signedAttempts).where(where))).toMatch(/append-only/);
    expect(await databaseRefusal(t.db.execute(sql`truncate signed_attempts`))).toMatch(/append-only/);
  });

  it('I12-ATTEMPTS a stale lease generation, a reused hash and a payment after a cancel are refused', async () => {
    const op = await broadcastWithdrawal();
    // Stale: the lease generation of an earlier lease.
    const stale = await databaseRefusal(
      withTenant(t.db, tenantId, async (tx) => {
        const current = await getOperation(tx, tenantId, op.operationId);
        const leased = await leaseForReplacement(tx, {
          operation: current,
          workerId: 'w3',
          leaseMs: 30_000,
          reason: 'test',
        });
        return recordAttempt(tx, {
          tenantId,
          operationId: op.operationId,
          leaseGeneration: (leased?.leaseGeneration ?? 0) - 1,
          kind: 'replacement',
          signedArtifact: '0xstale',
          txHash: hash(60_000),
          nonce: op.chainNonce ?? 0,
          fees,
          workerId: 'w3',
          requestedBy: 'policy',
        });
      }),
    );
    expect(stale).toMatch(/stale lease generation/);
    // A live lease blocks a second replacer.
    const blocked = await withTenant(t.db, tenantId, async (tx) => {
      const current = await getOperation(tx, tenantId, op.operationId);
      const first = await leaseForReplacement(tx, {
        operation: current,
        workerId: 'a',
        leaseMs: 30_000,
        reason: 'x',
      });
      const again = first
        ? await leaseForReplacement(tx, {
            operation: first.operation,
            workerId: 'b',
            leaseMs: 30_000,
            reason: 'y',
          })
        : 'lost';
      return again;
    });
    expect(blocked).toBeNull();
  });

  it('I12-ATTEMPTS only a cancel may follow a cancel; a bump request is refused once cancelling', async () => {
    const op = await broadcastWithdrawal();
    // The lease of the previous test's style expires only with time: use fresh operations.
    await replace(op, 'cancel', hash(70_001)).catch(async () => {
      throw new Error('cancel refused');
    });
    const other = await broadcastWithdrawal();
    await replace(other, 'cancel', hash(70_002));
    // Reusing a hash of another attempt is refused (hashes are unique).
    const third = await broadcastWithdrawal();
    expect(await databaseRefusal(replace(third, 'replacement', hash(70_001)))).toMatch(/unique|duplicate/);
    const attempts = await withTenant(t.db, tenantId, (tx) => listAttempts(tx, tenantId, op.operationId));
    expect(attempts.map((a) => a.kind)).toEqual(['original', 'cancel']);
    const afterCancel = await withTenant(t.db, tenantId, async (tx) => {
      const current = await getOperation(tx, tenantId, op.operationId);
      // Directly, with the generation the operation holds: still refused by the kind rule.
      return tx.insert(signedAttempts).values({
        tenantId,
        operationId: op.operationId,
        attemptNo: 3,
        nonce: current.chainNonce ?? 0,
        kind: 'replacement',
        signedArtifact: '0xpay-again',
        txHash: hash(70_003),
        gasLimit: '21000',
        maxFeePerGas: '9',
        maxPriorityFeePerGas: '1',
        leaseGeneration: current.leaseGeneration,
        createdBy: 'w',
      });
    }).then(
      () => 'accepted',
      (error: { cause?: { message?: string }; message: string }) => error.cause?.message ?? error.message,
    );
    expect(afterCancel).toMatch(/only a higher-fee cancel may follow/);
  });

  it('I12-ATTEMPTS another tenant sees none of the attempts (RLS)', async () => {
    const op = await broadcastWithdrawal();
    const otherTenant = await newTenant(t.db, 'Other Exchange');
    const seen = await withTenant(t.db, otherTenant, (tx) => listAttempts(tx, tenantId, op.operationId));
    expect(seen).toEqual([]);
  });

  it('I12-BUMP a staff bump request is refused for a withdrawal that is not sent', async () => {
    const created = await submit(t.db, tenantId, withdrawal(), `k-${Math.random().toString(36).slice(2)}`);
    const refused = await refusal(
      withTenant(t.db, tenantId, (tx) =>
        requestFeeBump(tx, {
          tenantId,
          operationId: created.operation.operationId,
          actor: 'staff:x',
          reason: 'stuck for an hour',
        }),
      ),
    );
    expect(refused.code).toBe('INVALID_TRANSITION');
  });

  it('I12-BUMP a fee cap above the approved one needs a raise_fee_cap proposal, four eyes; the history records the new cap and payload hash version', async () => {
    const op = await broadcastWithdrawal();
    const request = {
      kind: 'raise_fee_cap',
      idempotencyKey: `cap-${op.operationId}`,
      payload: {
        operationId: op.operationId,
        feeCapMinor: '5000000000000000',
        reason: 'base fee spiked for hours',
      },
    };
    const result = await withTenant(t.db, tenantId, async (tx) => {
      const { proposal } = await propose(tx, { tenantId, actor: 'staff:alice', request });
      const self = await refusal(
        decideProposal(tx, {
          tenantId,
          proposalId: proposal.proposalId,
          staffId: 'staff:alice',
          payloadHash: proposal.payloadHash,
          decision: 'approve',
        }),
      );
      expect(self.code).toBe('FORBIDDEN');
      return proposal;
    });
    const before = await withTenant(t.db, tenantId, (tx) => feeCapInForce(tx, op));
    expect(before).toEqual({ capMinor: null, version: 0, proposalId: null });
    await withTenant(t.db, tenantId, (tx) =>
      decideProposal(tx, {
        tenantId,
        proposalId: result.proposalId,
        staffId: bob,
        payloadHash: result.payloadHash,
        decision: 'approve',
      }),
    );
    const after = await withTenant(t.db, tenantId, async (tx) => {
      const current = await getOperation(tx, tenantId, op.operationId);
      return { cap: await feeCapInForce(tx, current), current };
    });
    expect(after.cap).toEqual({
      capMinor: 5_000_000_000_000_000n,
      version: 1,
      proposalId: result.proposalId,
    });
    // The operation's approved payload and hash are untouched; the history holds the new version.
    expect(after.current.payloadHash).toBe(op.payloadHash);
    expect(after.current.feeCapMinor).toBe(op.feeCapMinor);
    const history = await withTenant(t.db, tenantId, (tx) =>
      tx.execute(
        sql`select evidence from operation_transitions where tenant_id = ${tenantId} and operation_id = ${op.operationId} order by seq desc limit 1`,
      ),
    );
    const evidence = rowsOf<{ evidence: Record<string, unknown> }>(history)[0]?.evidence;
    expect(evidence).toMatchObject({
      feeCapMinor: '5000000000000000',
      payloadHashVersion: 1,
      originalPayloadHash: op.payloadHash,
      payloadHash: payloadHash({
        tenantId,
        kind: op.kind,
        reference: op.reference,
        accountRef: op.accountRef,
        assetCode: op.assetCode,
        network: op.network,
        destination: op.destination,
        memo: op.memo,
        amountMinor: op.amountMinor,
        feeCapMinor: '5000000000000000',
        policyVersion: op.policyVersion,
      }),
    });
    // A lower or equal cap than the one in force is refused.
    const lower = await refusal(
      withTenant(t.db, tenantId, (tx) =>
        propose(tx, {
          tenantId,
          actor: 'staff:alice',
          request: {
            ...request,
            idempotencyKey: `cap2-${op.operationId}`,
            payload: { ...request.payload, feeCapMinor: '1' },
          },
        }),
      ),
    );
    expect(lower.code).toBe('VALIDATION');
  });
});
