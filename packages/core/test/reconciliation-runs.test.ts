/**
 * I13-BAL a reconciliation run is the record an auditor receives: written 'running', finished (or
 * failed) once with its figures, then the database refuses any change, for every role the
 * application uses; figures can be added only to a running run. Runs are tenant-scoped (C22).
 */

import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { databaseRefusal, newTenant } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { finishRun, getRun, listRuns, startRun } from '../src/reconciliation/runs.ts';

let t: TestDatabase;
let tenantId: string;
let otherTenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  otherTenantId = await newTenant(t.db, 'Other Exchange');
});
afterAll(() => t.dispose());

const figure = {
  place: 'chain:ethereum',
  assetCode: 'ETH',
  liabilitiesAvailableMinor: '10',
  liabilitiesHeldMinor: '0',
  custodyControlMinor: '10',
  feeExpenseMinor: '0',
  inFlightWithdrawalsMinor: '0',
  expectedMinor: '10',
  observedMinor: '10',
  explainedMinor: '0',
  unexplainedMinor: '0',
  explanations: [],
  pinnedBlock: 7,
  reportedAt: null,
  accountTenants: 1,
  breakId: null,
};

async function finishedRun(): Promise<string> {
  return withTenant(t.db, tenantId, async (tx) => {
    const runId = await startRun(tx, { tenantId, ranBy: 'staff:s1', trigger: 'on_demand', inputs: { a: 1 } });
    await finishRun(tx, { tenantId, runId, figures: [figure], result: 'balanced', breaksOpened: 0 });
    return runId;
  });
}

describe('reconciliation runs', () => {
  it('I13-BAL a finished run and its figures are read back exactly', async () => {
    const runId = await finishedRun();
    const run = await withTenant(t.db, tenantId, (tx) => getRun(tx, { tenantId, runId }));
    expect(run).toMatchObject({
      status: 'finished',
      result: 'balanced',
      ranBy: 'staff:s1',
      figures: [figure],
    });
  });

  it('I13-BAL the database refuses to change or delete a finished run, or to add figures to it', async () => {
    const runId = await finishedRun();
    expect(
      await databaseRefusal(
        withTenant(t.db, tenantId, (tx) =>
          tx.execute(sql`update reconciliation_runs set result = 'variance' where run_id = ${runId}::uuid`),
        ),
      ),
    ).toMatch(/finished run never changes/);
    expect(
      await databaseRefusal(
        withTenant(t.db, tenantId, (tx) =>
          tx.execute(
            sql`update reconciliation_run_figures set observed_minor = 11 where run_id = ${runId}::uuid`,
          ),
        ),
      ),
    ).toMatch(/permission denied|refuse|append-only|not allowed/i);
    expect(
      await databaseRefusal(
        withTenant(t.db, tenantId, (tx) =>
          tx.execute(sql`delete from reconciliation_runs where run_id = ${runId}::uuid`),
        ),
      ),
    ).toMatch(/permission denied|refuse|append-only|not allowed/i);
    // Not even the owner (the migration role) may edit a finished run's figures.
    expect(
      await databaseRefusal(
        t.db.execute(
          sql`update reconciliation_run_figures set observed_minor = 11 where run_id = ${runId}::uuid`,
        ),
      ),
    ).toBeTruthy();
    expect(
      await databaseRefusal(
        withTenant(t.db, tenantId, (tx) =>
          finishRun(tx, {
            tenantId,
            runId,
            figures: [{ ...figure, assetCode: 'USDC' }],
            result: 'balanced',
            breaksOpened: 0,
          }),
        ),
      ),
    ).toMatch(/only to a running reconciliation run/);
  });

  it('I13-BAL C22 another tenant sees none of the runs', async () => {
    await finishedRun();
    expect(await withTenant(t.db, otherTenantId, (tx) => listRuns(tx, { tenantId: otherTenantId }))).toEqual(
      [],
    );
    const unfiltered = await withTenant(t.db, otherTenantId, async (tx) =>
      rowsOf(await tx.execute(sql`select run_id from reconciliation_runs`)),
    );
    expect(unfiltered).toEqual([]);
  });
});
