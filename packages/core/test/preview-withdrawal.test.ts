import { IdemError, withdrawalKey } from '@idem/contracts';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { ETH, fund, newTenant, provisionRiskPolicy, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../src/db/rows.ts';
import { withTenantAsConnection } from '../src/db/tenant-scope.ts';
import { freezeAsOperator } from '../src/freeze/freeze.ts';
import { submitWithdrawal } from '../src/operations/create-withdrawal.ts';
import { previewWithdrawal } from '../src/operations/preview-withdrawal.ts';

/**
 * The dry run (I33-PREVIEW): the decision a withdrawal would get now, the balance after its hold,
 * whether a freeze would hold it and whether its id is taken; it writes nothing, and the key and the
 * withdrawal id stay free for the real submission.
 */
let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  await provisionRiskPolicy(t.db, {
    tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: (1n * ETH).toString(),
    fourEyesMinMinor: (5n * ETH).toString(),
    velocityMaxPerHour: 3,
  });
  await fund(t.db, tenantId, 'acct-1', 'ETH', 10n * ETH);
});
afterAll(() => t.dispose());

/** Every table a submission writes to, counted for the whole database. */
async function rowCounts() {
  const [row] = rowsOf<Record<string, number>>(
    await t.db.execute(sql`select
      (select count(*)::int from operations) as operations,
      (select count(*)::int from operation_transitions) as transitions,
      (select count(*)::int from journal_entries) as entries,
      (select count(*)::int from postings) as postings,
      (select count(*)::int from work_items) as work_items`),
  );
  return row;
}

describe('I33-PREVIEW withdrawals.preview answers what the policy would decide and writes nothing', () => {
  it('I33-PREVIEW ALLOW within the automatic limit, REVIEW with one approver above it and two at the four-eyes amount, DENY INSUFFICIENT_FUNDS beyond the balance, each with the balance after', async () => {
    const ask = (amountMinor: bigint) =>
      previewWithdrawal(t.db, { tenantId, request: withdrawal({ amountMinor: amountMinor.toString() }) });
    expect(await ask(ETH / 2n)).toMatchObject({
      decision: 'ALLOW',
      approvalsRequired: 0,
      reasons: [],
      availableMinor: (10n * ETH).toString(),
      balanceAfterMinor: (10n * ETH - ETH / 2n).toString(),
      heldByFreeze: false,
      alreadySubmitted: null,
    });
    expect(await ask(2n * ETH)).toMatchObject({
      decision: 'REVIEW',
      approvalsRequired: 1,
      reasons: ['amount_above_auto_approve'],
    });
    expect(await ask(5n * ETH)).toMatchObject({
      decision: 'REVIEW',
      approvalsRequired: 2,
      reasons: ['amount_above_auto_approve', 'four_eyes_amount'],
    });
    expect(await ask(11n * ETH)).toMatchObject({
      decision: 'DENY',
      reasons: ['INSUFFICIENT_FUNDS'],
      balanceAfterMinor: (-1n * ETH).toString(),
    });
  });

  it('I33-PREVIEW writes no row anywhere, and the key and withdrawal id it was asked with are still free: the submission after it is CREATED and reviewed as previewed', async () => {
    const request = withdrawal({ amountMinor: (2n * ETH).toString() });
    const key = withdrawalKey(request.withdrawalId);
    const before = await rowCounts();
    const preview = await previewWithdrawal(t.db, { tenantId, request, idempotencyKey: key });
    expect(await rowCounts()).toEqual(before);
    const claim = await submitWithdrawal(t.db, { tenantId, request, idempotencyKey: key });
    expect(claim.outcome).toBe('CREATED');
    expect(preview.decision).toBe('REVIEW');
    expect(await previewWithdrawal(t.db, { tenantId, request, idempotencyKey: key })).toMatchObject({
      alreadySubmitted: { operationId: claim.operation.operationId, state: 'REQUESTED', idempotencyKey: key },
    });
  });

  it('I33-PREVIEW counts itself in the hour velocity, as its own review will once it is stored', async () => {
    const fresh = await newTenant(t.db, 'Velocity');
    await provisionRiskPolicy(t.db, {
      tenantId: fresh,
      assetCode: 'ETH',
      autoApproveMaxMinor: (1n * ETH).toString(),
      fourEyesMinMinor: (5n * ETH).toString(),
      velocityMaxPerHour: 2,
    });
    await fund(t.db, fresh, 'acct-1', 'ETH', 10n * ETH);
    const small = () => withdrawal({ amountMinor: '1000' });
    for (let i = 0; i < 2; i++) {
      const request = small();
      await submitWithdrawal(t.db, {
        tenantId: fresh,
        request,
        idempotencyKey: withdrawalKey(request.withdrawalId),
      });
    }
    // Two this hour: a third is over the limit of two.
    expect(await previewWithdrawal(t.db, { tenantId: fresh, request: small() })).toMatchObject({
      decision: 'REVIEW',
      reasons: ['velocity'],
    });
  });

  it('I33-PREVIEW I33-FREEZE says when a freeze in force would hold the withdrawal', async () => {
    const fresh = await newTenant(t.db, 'Frozen');
    await fund(t.db, fresh, 'acct-9', 'ETH', ETH);
    await withTenantAsConnection(t.db, fresh, (tx) =>
      freezeAsOperator(tx, {
        tenantId: fresh,
        operator: 'ops',
        request: { scope: 'account', accountRef: 'acct-9', reason: 'incident' },
      }),
    );
    const preview = await previewWithdrawal(t.db, {
      tenantId: fresh,
      request: withdrawal({ accountId: 'acct-9', amountMinor: '1000' }),
    });
    expect(preview.heldByFreeze).toBe(true);
    const other = await previewWithdrawal(t.db, {
      tenantId: fresh,
      request: withdrawal({ accountId: 'acct-8', amountMinor: '1000' }),
    });
    expect(other.heldByFreeze).toBe(false);
  });

  it('I33-PREVIEW a request a submission would refuse is refused the same way (VALIDATION), and nothing is written', async () => {
    const before = await rowCounts();
    const refusal = await previewWithdrawal(t.db, {
      tenantId,
      request: withdrawal({ destination: 'not-an-address' }),
    }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(IdemError);
    expect((refusal as IdemError).code).toBe('VALIDATION');
    expect(await rowCounts()).toEqual(before);
  });
});
