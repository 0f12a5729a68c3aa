/**
 * A stolen database login cannot pay out. Whoever holds the
 * application's login runs statements as `idem_app` with a tenant bound, exactly as the server does
 * (`withTenant`). These tests are those statements: each must be refused by the database itself,
 * whatever the application's code would have done, while the legitimate paths keep working.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { payloadHash } from '@idem/contracts/payload';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import {
  balanceOf,
  ETH,
  evmAddress,
  fund,
  newTenant,
  provisionRiskPolicy,
  staffMembers,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decideWithdrawal } from '../src/approvals/decide.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant, withTenantAsConnection } from '../src/db/tenant-scope.ts';
import { registerHotWallet } from '../src/hot-wallets/hot-wallets.ts';
import { postEntry } from '../src/journal/post-entry.ts';
import { createWithdrawal } from '../src/operations/create-withdrawal.ts';
import { getOperation, type Operation } from '../src/operations/operation-record.ts';
import { decideProposal } from '../src/proposals/decide.ts';
import { propose } from '../src/proposals/propose.ts';
import { reviewWithdrawal } from '../src/risk/review.ts';

let t: TestDatabase;
let tenantId: string;
let policyVersion: number;
let approvers: string[];

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db, 'Guarded Money');
  await fund(t.db, tenantId, 'acct-1', 'ETH', 100n * ETH);
  // Up to 1 ETH is approved by the review alone; from 10 ETH two approvers are needed.
  policyVersion = (
    await provisionRiskPolicy(t.db, {
      tenantId,
      assetCode: 'ETH',
      autoApproveMaxMinor: ETH.toString(),
      fourEyesMinMinor: (10n * ETH).toString(),
      velocityMaxPerHour: 1_000,
      actor: 'test',
    })
  ).policyVersion;
  approvers = await staffMembers(t.db, tenantId, 'approver', 2);
});
afterAll(() => t.dispose());

const asApp = <T>(work: Parameters<typeof withTenant<T>>[2]) => withTenant(t.db, tenantId, work);

/** The database's own refusal: the driver puts the statement in the message and the reason in the cause. */
async function refusedWith(attempt: Promise<unknown>, reason: RegExp): Promise<void> {
  const error = await attempt.then(
    () => null,
    (caught: unknown) => caught as { message?: string; cause?: { message?: string } },
  );
  expect(error, 'the database refused the statement').not.toBeNull();
  expect(error?.cause?.message ?? error?.message ?? '').toMatch(reason);
}

/** A withdrawal paying `destination`, as the attacker would write it: every column and a correct hash. */
function forgedWithdrawal(destination: string, columns: Record<string, unknown> = {}) {
  const reference = `wd-${randomBytes(6).toString('hex')}`;
  const payload = {
    tenantId,
    kind: 'withdrawal',
    reference,
    accountRef: 'acct-1',
    assetCode: 'ETH',
    network: 'ethereum',
    destination,
    memo: null,
    amountMinor: (5n * ETH).toString(),
    feeCapMinor: null,
    policyVersion,
  };
  return { operationId: randomUUID(), reference, hash: payloadHash(payload), ...columns };
}

async function requested(amountMinor: bigint, requester = 'customer:acct-1'): Promise<Operation> {
  return asApp(async (tx) => {
    const created = await createWithdrawal(tx, {
      tenantId,
      request: withdrawal({ amountMinor: amountMinor.toString(), accountId: 'acct-1' }),
      idempotencyKey: `k-${randomBytes(6).toString('hex')}`,
      actor: requester,
    });
    return created.operation;
  });
}

describe.skipIf(!onPostgres)('a stolen database login cannot pay out (PostgreSQL)', () => {
  it('I32-DB a new operation row is a REQUESTED withdrawal with nothing signed, leased or sent: an APPROVED insert is refused', async () => {
    const attacker = evmAddress();
    const insert = (state: string, extra = sql``) => {
      const forged = forgedWithdrawal(attacker);
      return asApp((tx) =>
        tx.execute(sql`insert into operations (tenant_id, operation_id, kind, idempotency_key, reference,
            account_ref, asset_code, network, destination, amount_minor, policy_version, payload_hash, state)
          values (${tenantId}::uuid, ${forged.operationId}::uuid, 'withdrawal', ${forged.reference}, ${forged.reference},
            'acct-1', 'ETH', 'ethereum', ${attacker}, ${(5n * ETH).toString()}, ${policyVersion}, ${forged.hash}, ${state})
          ${extra}`),
      );
    };
    await refusedWith(insert('APPROVED'), /a new withdrawal is REQUESTED/);
    await refusedWith(insert('SIGNED'), /a new withdrawal is REQUESTED/);
    // REQUESTED, but already carrying what only later steps write.
    const forged = forgedWithdrawal(attacker);
    await refusedWith(
      asApp((tx) =>
        tx.execute(sql`insert into operations (tenant_id, operation_id, kind, idempotency_key, reference,
            account_ref, asset_code, network, destination, amount_minor, policy_version, payload_hash, state,
            approvals_required, lease_owner, lease_expires_at, lease_generation)
          values (${tenantId}::uuid, ${forged.operationId}::uuid, 'withdrawal', ${forged.reference}, ${forged.reference},
            'acct-1', 'ETH', 'ethereum', ${attacker}, ${(5n * ETH).toString()}, ${policyVersion}, ${forged.hash}, 'REQUESTED',
            0, 'w', now() + interval '1 minute', 1)`),
      ),
      /a new withdrawal is REQUESTED/,
    );
    const stored = rowsOf<{ n: number }>(
      await asApp((tx) =>
        tx.execute(sql`select count(*)::int as n from operations where destination = ${attacker}`),
      ),
    );
    expect(stored[0]?.n).toBe(0);
  });

  it('I32-DB a withdrawal becomes APPROVED only on enough distinct active approvals bound to its hash, or the review within the policy, while its hold exists', async () => {
    // Straight to APPROVED, no decision at all.
    const op = await requested(5n * ETH);
    const approve = (target: Operation) =>
      asApp((tx) =>
        tx.execute(sql`update operations set state = 'APPROVED', version = version + 1
                        where tenant_id = ${tenantId}::uuid and operation_id = ${target.operationId}::uuid`),
      );
    await refusedWith(approve(op), /cannot be APPROVED/);
    // Claiming the review needs no person, for an amount above the auto-approve limit.
    await refusedWith(
      asApp((tx) =>
        tx.execute(sql`update operations set approvals_required = 0, version = version + 1
                        where tenant_id = ${tenantId}::uuid and operation_id = ${op.operationId}::uuid`),
      ),
      /needs at least 1 approval/,
    );
    // The review records one approval needed; forged decisions by names that are no active member,
    // or by the requester, count for nothing.
    const reviewed = await asApp((tx) => reviewWithdrawal(tx, op));
    expect(reviewed.approvalsRequired).toBe(1);
    for (const approver of ['staff:mallory', 'customer:acct-1']) {
      await asApp((tx) =>
        tx.execute(sql`insert into approvals (tenant_id, operation_id, approver, payload_hash, decision)
                        values (${tenantId}::uuid, ${op.operationId}::uuid, ${approver}, ${op.payloadHash}, 'approve')`),
      );
    }
    await refusedWith(approve(op), /cannot be APPROVED: 0 of 1 approvals/);
    // An approval by a real member bound to another hash counts for nothing either.
    const [alice, bob] = approvers as [string, string];
    await asApp((tx) =>
      tx.execute(sql`insert into approvals (tenant_id, operation_id, approver, payload_hash, decision)
                      values (${tenantId}::uuid, ${op.operationId}::uuid, ${alice}, ${'f'.repeat(64)}, 'approve')`),
    );
    await refusedWith(approve(op), /cannot be APPROVED: 0 of 1 approvals/);
    // The legitimate path: a member's decision bound to the stored hash approves it.
    const decided = await asApp((tx) =>
      decideWithdrawal(tx, {
        tenantId,
        operationId: op.operationId,
        staffId: bob,
        payloadHash: op.payloadHash,
        decision: 'approve',
      }),
    );
    expect(decided.operation.state).toBe('APPROVED');

    // Within the auto-approve limit the review alone approves it, as the worker's review step does.
    const small = await requested(ETH / 2n);
    expect((await asApp((tx) => reviewWithdrawal(tx, small))).state).toBe('APPROVED');
  });

  it('I32-DB a withdrawal state follows the transition table only, and a held withdrawal without its hold is never approved', async () => {
    const op = await requested(ETH / 4n);
    await refusedWith(
      asApp((tx) =>
        tx.execute(sql`update operations set state = 'BROADCAST', version = version + 1
                        where tenant_id = ${tenantId}::uuid and operation_id = ${op.operationId}::uuid`),
      ),
      /withdrawal .* cannot go from REQUESTED to BROADCAST/,
    );
    // A withdrawal rejected for want of funds has no hold: nothing can approve it.
    const broke = await asApp(async (tx) => {
      const created = await createWithdrawal(tx, {
        tenantId,
        request: withdrawal({ amountMinor: (1_000n * ETH).toString(), accountId: 'acct-1' }),
        idempotencyKey: `k-${randomBytes(6).toString('hex')}`,
        actor: 'customer:acct-1',
      });
      return created.operation;
    });
    expect(broke.state).toBe('REJECTED');
    await refusedWith(
      asApp((tx) =>
        tx.execute(sql`update operations set state = 'APPROVED', version = version + 1
                        where tenant_id = ${tenantId}::uuid and operation_id = ${broke.operationId}::uuid`),
      ),
      /cannot go from REJECTED to APPROVED/,
    );
    expect((await asApp((tx) => getOperation(tx, tenantId, op.operationId))).state).toBe('REQUESTED');
  });

  it('I32-DB the application role cannot credit a customer from a control account: no proposal, no deposit evidence, no credit', async () => {
    const before = await balanceOf(t.db, tenantId, 'mallory');
    const credit = (operationId: string, counterpart: string, kind = 'credit') =>
      asApp((tx) =>
        postEntry(tx, {
          tenantId,
          operationId,
          kind: kind as 'credit',
          postings: [
            { account: 'mallory', bucket: 'available', assetCode: 'ETH', amount: 1_000n * ETH },
            { account: counterpart, bucket: 'control', assetCode: 'ETH', amount: -1_000n * ETH },
          ],
        }),
      );
    await refusedWith(credit(randomUUID(), '@adjustments'), /credits mallory from @adjustments/);
    await refusedWith(credit(randomUUID(), '@custody'), /credits mallory from @custody/);
    await refusedWith(credit(randomUUID(), '@custody', 'unsettle'), /credits mallory from @custody/);
    // An adjustment operation written by hand, with no executed proposal behind it.
    const reference = `adj-${randomBytes(6).toString('hex')}`;
    const hash = payloadHash({
      tenantId,
      kind: 'adjustment',
      reference,
      accountRef: 'mallory',
      assetCode: 'ETH',
      network: 'ethereum',
      destination: null,
      memo: 'goodwill',
      amountMinor: (1_000n * ETH).toString(),
      feeCapMinor: null,
      policyVersion,
    });
    const adjustmentId = randomUUID();
    await refusedWith(
      asApp(async (tx) => {
        await tx.execute(sql`insert into operations (tenant_id, operation_id, kind, idempotency_key, reference,
            account_ref, asset_code, network, memo, amount_minor, policy_version, payload_hash, state)
          values (${tenantId}::uuid, ${adjustmentId}::uuid, 'adjustment', ${reference}, ${reference},
            'mallory', 'ETH', 'ethereum', 'goodwill', ${(1_000n * ETH).toString()}, ${policyVersion}, ${hash}, 'CONFIRMED')`);
        return postEntry(tx, {
          tenantId,
          operationId: adjustmentId,
          kind: 'credit',
          postings: [
            { account: 'mallory', bucket: 'available', assetCode: 'ETH', amount: 1_000n * ETH },
            { account: '@adjustments', bucket: 'control', assetCode: 'ETH', amount: -1_000n * ETH },
          ],
        });
      }),
      /credits mallory from @adjustments/,
    );
    // A proposal row written EXECUTED by the attacker's own statement, with no approval, and the
    // adjustment operation under its key: credits nothing either.
    const forgedProposal = randomUUID();
    const key = `proposal-${forgedProposal}`;
    await refusedWith(
      asApp(async (tx) => {
        await tx.execute(sql`insert into proposals (tenant_id, proposal_id, kind, idempotency_key, payload,
            payload_hash, proposed_by, approvals_required, state)
          values (${tenantId}::uuid, ${forgedProposal}::uuid, 'adjustment', ${key},
            ${JSON.stringify({ accountId: 'mallory', asset: 'ETH', amountMinor: (1_000n * ETH).toString(), reason: 'goodwill' })}::jsonb,
            ${'e'.repeat(64)}, 'staff:mallory', 1, 'EXECUTED')`);
        const forgedHash = payloadHash({
          tenantId,
          kind: 'adjustment',
          reference: key,
          accountRef: 'mallory',
          assetCode: 'ETH',
          network: 'ethereum',
          destination: null,
          memo: 'goodwill',
          amountMinor: (1_000n * ETH).toString(),
          feeCapMinor: null,
          policyVersion,
        });
        const operationId = randomUUID();
        await tx.execute(sql`insert into operations (tenant_id, operation_id, kind, idempotency_key, reference,
            account_ref, asset_code, network, memo, amount_minor, policy_version, payload_hash, state)
          values (${tenantId}::uuid, ${operationId}::uuid, 'adjustment', ${key}, ${key},
            'mallory', 'ETH', 'ethereum', 'goodwill', ${(1_000n * ETH).toString()}, ${policyVersion}, ${forgedHash}, 'CONFIRMED')`);
        return postEntry(tx, {
          tenantId,
          operationId,
          kind: 'credit',
          postings: [
            { account: 'mallory', bucket: 'available', assetCode: 'ETH', amount: 1_000n * ETH },
            { account: '@adjustments', bucket: 'control', assetCode: 'ETH', amount: -1_000n * ETH },
          ],
        });
      }),
      /credits mallory from @adjustments/,
    );
    expect(await balanceOf(t.db, tenantId, 'mallory')).toEqual(before);

    // The legitimate path: one member proposes, another approves; the credit posts.
    const [alice, bob] = approvers as [string, string];
    const { proposal } = await asApp((tx) =>
      propose(tx, {
        tenantId,
        actor: alice,
        request: {
          kind: 'adjustment',
          idempotencyKey: `adj-${randomBytes(6).toString('hex')}`,
          payload: {
            accountId: 'mallory',
            asset: 'ETH',
            amountMinor: '700',
            reason: 'goodwill credit, ticket 4411',
          },
        },
      }),
    );
    const decided = await asApp((tx) =>
      decideProposal(tx, {
        tenantId,
        proposalId: proposal.proposalId,
        staffId: bob,
        payloadHash: proposal.payloadHash,
        decision: 'approve',
      }),
    );
    expect(decided.proposal.state).toBe('EXECUTED');
    expect(await balanceOf(t.db, tenantId, 'mallory')).toEqual({
      ...before,
      available: before.available + 700n,
    });
  });

  it('I32-DB the application role cannot register a hot wallet, and one network address belongs to one row', async () => {
    const address = evmAddress();
    await refusedWith(
      asApp((tx) =>
        registerHotWallet(tx, {
          tenantId,
          network: 'ethereum',
          address,
          keyRef: 'pkcs11:module=/tmp/evil.so;token=x;label=y',
        }),
      ),
      /permission denied for table hot_wallets/,
    );
    // The deployment's own tools (the CLI's `idem hot-wallet`, as the tables' owner) still register one.
    const wallet = await withTenantAsConnection(t.db, tenantId, (tx) =>
      registerHotWallet(tx, { tenantId, network: 'ethereum', address, keyRef: 'dev:1' }),
    );
    expect(wallet.address).toBe(address);
    const other = await newTenant(t.db, 'Same Address');
    await refusedWith(
      withTenantAsConnection(t.db, other, (tx) =>
        tx.execute(sql`insert into hot_wallets (tenant_id, network, address, key_ref)
                        values (${other}::uuid, 'ethereum', ${address}, 'dev:1')`),
      ),
      /hot_wallet_addresses_network_address_pk/,
    );
  });
});
