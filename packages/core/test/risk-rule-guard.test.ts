/**
 * An asset's risk rule decides which withdrawals the automatic review approves with no person, and
 * which need two. Whoever holds the application's login runs statements as `idem_app` with a tenant
 * bound, exactly as the server does (`withTenant`); these tests are those statements. A tightening
 * applies at once, as the staff screen applies it; a loosening only as the apply step of a control
 * change other admins approved and waited out (docs/GOVERNANCE.md), whatever the application's code
 * would have done. Only the deployment's own tools (the tables' owner: the CLI's `risk-policy set`,
 * provisioning) write any rule directly.
 */
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import {
  ETH,
  fund,
  newTenant,
  provisionRiskPolicy,
  staffMembers,
  submit,
  withdrawal,
} from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Tx } from '../src/db/connect.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import * as core from '../src/index.ts';

let t: TestDatabase;
let tenantId: string;

/** Up to 1 ETH the review approves alone; from 5 ETH two approvers; 10 an hour; a 60-minute window. */
const ETH_RULE = {
  assetCode: 'ETH',
  autoApproveMaxMinor: ETH.toString(),
  fourEyesMinMinor: (5n * ETH).toString(),
  velocityMaxPerHour: 10,
  similarWindowMinutes: 60,
};
const DELAY_SECONDS = 3;
const HUGE = (10n ** 30n).toString();

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db, 'Guarded Rules');
  await fund(t.db, tenantId, 'acct-1', 'ETH', 1_000n * ETH);
  // The deployment's own tools (the owner role) set the starting rule directly.
  await provisionRiskPolicy(t.db, { tenantId, ...ETH_RULE, actor: 'provisioning' });
});
afterAll(() => t.dispose());

const asApp = <T>(work: (tx: Tx) => Promise<T>) => withTenant(t.db, tenantId, work);

/** A statement of the attacker's own, naming an actor as the policy history asks. */
const statement = (tenant: string, query: ReturnType<typeof sql>) =>
  withTenant(t.db, tenant, async (tx) => {
    await tx.execute(sql`select set_config('app.actor', 'mallory', true)`);
    return tx.execute(query);
  });

/** The database's own refusal (the driver wraps it: the statement is in the message, the reason in the cause). */
async function refusedWith(attempt: Promise<unknown>, reason: RegExp): Promise<void> {
  const error = await attempt.then(
    () => null,
    (caught: unknown) => caught as { message?: string; cause?: { message?: string } },
  );
  expect(error, 'the database refused the statement').not.toBeNull();
  expect(error?.cause?.message ?? error?.message ?? '').toMatch(reason);
}
const NOT_APPROVED = /risk rule is loosened only by an approved, due control change/;

interface StoredRule {
  asset_code: string;
  auto_approve_max_minor: string;
  four_eyes_min_minor: string;
  velocity_max_per_hour: number;
  similar_window_minutes: number;
}
async function rulesInForce(tenant = tenantId): Promise<StoredRule[]> {
  return rowsOf<StoredRule>(
    await withTenant(t.db, tenant, (tx) =>
      tx.execute(sql`select asset_code, auto_approve_max_minor::text, four_eyes_min_minor::text,
                            velocity_max_per_hour, similar_window_minutes
                       from risk_policies order by asset_code`),
    ),
  );
}
const stored = (rule: typeof ETH_RULE): StoredRule => ({
  asset_code: rule.assetCode,
  auto_approve_max_minor: rule.autoApproveMaxMinor,
  four_eyes_min_minor: rule.fourEyesMinMinor,
  velocity_max_per_hour: rule.velocityMaxPerHour,
  similar_window_minutes: rule.similarWindowMinutes,
});

describe('the database guards the risk rules against the application role', () => {
  it('I32-DB the application role cannot write a first rule that auto-approves anything', async () => {
    // With no rule every withdrawal needs a person: a first rule auto-approving up to a huge
    // amount lets everything through unreviewed.
    await refusedWith(
      statement(
        tenantId,
        sql`insert into risk_policies (tenant_id, asset_code, auto_approve_max_minor, four_eyes_min_minor)
                    values (${tenantId}::uuid, 'BTC', ${HUGE}::numeric, ${HUGE}::numeric * 10)`,
      ),
      NOT_APPROVED,
    );
    // The same through core's own write, as the application's code would make it.
    await refusedWith(
      asApp((tx) =>
        core.setRiskPolicy(tx, {
          tenantId,
          assetCode: 'USDC',
          autoApproveMaxMinor: '1000000000000',
          fourEyesMinMinor: '10000000000000',
          actor: 'mallory',
        }),
      ),
      NOT_APPROVED,
    );
    expect((await rulesInForce()).map((rule) => rule.asset_code)).toEqual(['ETH']);
  });

  it('I32-DB the application role cannot raise a limit of the rule in force, nor move it to another asset', async () => {
    // Each limit of the ETH rule moved the loose way: auto-approve max, four-eyes min and velocity
    // up, the similar-withdrawal window down; and the whole rule moved to another asset.
    for (const [loosen, reason] of [
      [sql`auto_approve_max_minor = ${HUGE}::numeric`, NOT_APPROVED],
      [sql`four_eyes_min_minor = ${HUGE}::numeric`, NOT_APPROVED],
      [sql`velocity_max_per_hour = 100000`, NOT_APPROVED],
      [sql`similar_window_minutes = 0`, NOT_APPROVED],
      [sql`asset_code = 'BTC'`, /risk rule stays with its tenant and asset/],
    ] as const) {
      await refusedWith(
        statement(
          tenantId,
          sql`update risk_policies set ${loosen} where tenant_id = ${tenantId}::uuid and asset_code = 'ETH'`,
        ),
        reason,
      );
    }
    // Through the upsert core writes with, too.
    await refusedWith(
      asApp((tx) =>
        core.setRiskPolicy(tx, { tenantId, ...ETH_RULE, autoApproveMaxMinor: HUGE, actor: 'mallory' }),
      ),
      NOT_APPROVED,
    );
    expect(await rulesInForce()).toEqual([stored(ETH_RULE)]);
    // So a 2 ETH withdrawal, above the limit in force, still waits for a person.
    const created = await submit(t.db, tenantId, withdrawal({ amountMinor: (2n * ETH).toString() }), 'k-2');
    const reviewed = await asApp((tx) => core.reviewWithdrawal(tx, created.operation));
    expect(reviewed).toMatchObject({ state: 'REQUESTED', approvalsRequired: 1 });
  });

  it('I32-DB the application role cannot remove a rule', async () => {
    // With no rule, nothing reaches four eyes: one approval moves any amount. The application role
    // holds no DELETE on the table, and the trigger refuses it too should one be granted.
    await refusedWith(
      statement(
        tenantId,
        sql`delete from risk_policies where tenant_id = ${tenantId}::uuid and asset_code = 'ETH'`,
      ),
      /permission denied for table risk_policies|risk rule is never removed/,
    );
    expect(await rulesInForce()).toEqual([stored(ETH_RULE)]);
  });

  it('I32-DB the application role tightens a rule at once, and writes a first rule that auto-approves nothing', async () => {
    const tenant = await newTenant(t.db, 'Tightening Rules');
    await provisionRiskPolicy(t.db, { tenantId: tenant, ...ETH_RULE, actor: 'provisioning' });
    const [admin] = await staffMembers(t.db, tenant, 'admin', 1);
    const inTenant = <T>(work: (tx: Tx) => Promise<T>) => withTenant(t.db, tenant, work);
    // The staff screen's path: lower limits apply at once.
    const lowered = {
      assetCode: 'ETH',
      autoApproveMaxMinor: '100',
      fourEyesMinMinor: '1000',
      velocityMaxPerHour: 5,
    };
    expect(await inTenant((tx) => core.changeRiskRule(tx, tenant, lowered, admin as string))).toMatchObject({
      outcome: 'APPLIED',
      changed: true,
    });
    // A statement of its own that only tightens: a longer similar-withdrawal window.
    await inTenant(async (tx) => {
      await tx.execute(sql`select set_config('app.actor', 'ops', true)`);
      await tx.execute(sql`update risk_policies set similar_window_minutes = 120 where asset_code = 'ETH'`);
    });
    // A first rule that auto-approves nothing is at least as strict as none (every withdrawal needs
    // a person either way; from its four-eyes threshold, two).
    await inTenant((tx) =>
      core.setRiskPolicy(tx, {
        tenantId: tenant,
        assetCode: 'BTC',
        autoApproveMaxMinor: '0',
        fourEyesMinMinor: '100000000',
        actor: 'ops',
      }),
    );
    expect(
      rowsOf<StoredRule>(
        await inTenant((tx) =>
          tx.execute(sql`select asset_code, auto_approve_max_minor::text, four_eyes_min_minor::text,
                                velocity_max_per_hour, similar_window_minutes
                           from risk_policies order by asset_code`),
        ),
      ),
    ).toEqual([
      stored({ ...ETH_RULE, assetCode: 'BTC', autoApproveMaxMinor: '0', fourEyesMinMinor: '100000000' }),
      stored({ ...lowered, similarWindowMinutes: 120 }),
    ]);
  });

  it('I32-DB a loosening applies only as the apply step of an approved, due control change naming exactly the new rule', async () => {
    const raised = { ...ETH_RULE, autoApproveMaxMinor: (2n * ETH).toString(), velocityMaxPerHour: 20 };
    const { similarWindowMinutes: _kept, ...raisedRule } = raised;
    const firstBtc = {
      assetCode: 'BTC',
      autoApproveMaxMinor: '1000000',
      fourEyesMinMinor: '100000000',
      velocityMaxPerHour: 10,
    };
    // A tenant of its own: its only rule is ETH's, as provisioned.
    const tenant = await newTenant(t.db, 'Loosened Rules');
    const [alice, bob] = (await staffMembers(t.db, tenant, 'admin', 2)) as [string, string];
    await core.setTenantGovernance(t.db, { tenantId: tenant, looseningDelaySeconds: DELAY_SECONDS });
    await provisionRiskPolicy(t.db, { tenantId: tenant, ...ETH_RULE, actor: 'provisioning' });
    const inTenant = <T>(work: (tx: Tx) => Promise<T>) => withTenant(t.db, tenant, work);
    const proposed = await inTenant(async (tx) => [
      await core.changeRiskRule(tx, tenant, raisedRule, alice),
      await core.changeRiskRule(tx, tenant, firstBtc, alice),
    ]);
    expect(proposed.map((outcome) => outcome.outcome)).toEqual(['PROPOSED', 'PROPOSED']);
    const raise = (rule: typeof raised) =>
      statement(
        tenant,
        sql`update risk_policies set auto_approve_max_minor = ${rule.autoApproveMaxMinor}::numeric,
                      four_eyes_min_minor = ${rule.fourEyesMinMinor}::numeric,
                      velocity_max_per_hour = ${rule.velocityMaxPerHour},
                      similar_window_minutes = ${rule.similarWindowMinutes}
                    where tenant_id = ${tenant}::uuid and asset_code = 'ETH'`,
      );
    // Proposed is not approved.
    await refusedWith(raise(raised), NOT_APPROVED);
    for (const outcome of proposed) {
      const [row] = rowsOf<{ payload_hash: string }>(
        await inTenant((tx) =>
          tx.execute(sql`select payload_hash from proposals where proposal_id = ${outcome.proposalId}::uuid`),
        ),
      );
      const decided = await inTenant((tx) =>
        core.decideProposal(tx, {
          tenantId: tenant,
          proposalId: outcome.proposalId as string,
          staffId: bob,
          payloadHash: row?.payload_hash as string,
          decision: 'approve',
        }),
      );
      expect(decided.proposal.state).toBe('APPROVED');
    }
    // Approved, but its delay not waited out.
    await refusedWith(raise(raised), NOT_APPROVED);
    await vi.waitFor(
      async () => {
        const [due] = rowsOf<{ n: number }>(
          await inTenant((tx) =>
            tx.execute(
              sql`select count(*)::int as n from proposals where state = 'APPROVED' and effective_at <= now()`,
            ),
          ),
        );
        expect(due?.n).toBe(2);
      },
      { timeout: (DELAY_SECONDS + 10) * 1_000, interval: 200 },
    );
    // Due, but not what was approved: a higher limit, or the approved limits with a shorter
    // similar-withdrawal window (which no control change names).
    await refusedWith(raise({ ...raised, autoApproveMaxMinor: (3n * ETH).toString() }), NOT_APPROVED);
    await refusedWith(raise({ ...raised, similarWindowMinutes: 1 }), NOT_APPROVED);
    await refusedWith(
      statement(
        tenant,
        sql`insert into risk_policies (tenant_id, asset_code, auto_approve_max_minor, four_eyes_min_minor)
                    values (${tenant}::uuid, 'BTC', 2000000, 100000000)`,
      ),
      NOT_APPROVED,
    );
    // The governance step applies both: the raised ETH rule, and BTC's first rule.
    expect(await inTenant((tx) => core.applyDueControlChanges(tx, tenant))).toMatchObject({
      applied: 2,
      refused: 0,
    });
    expect(await rulesInForce(tenant)).toEqual([
      stored({ ...firstBtc, similarWindowMinutes: 60 }),
      stored(raised),
    ]);
  });
});
