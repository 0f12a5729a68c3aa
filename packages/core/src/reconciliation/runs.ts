import { randomUUID } from 'node:crypto';
import {
  IdemError,
  type ReconciliationRun,
  type ReconciliationRunDetail,
  type RunFigure,
  type RunHistoryPoint,
  type RunResult,
} from '@idem/contracts';
import { and, asc, desc, eq, inArray } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { reconciliationRunFigures, reconciliationRuns } from '../db/schema/index.ts';

type RunRow = typeof reconciliationRuns.$inferSelect;
type FigureRow = typeof reconciliationRunFigures.$inferSelect;

/** Records that a run began: who or what ran it and what it is pinned to. */
export async function startRun(
  tx: Tx,
  input: {
    tenantId: string;
    ranBy: string;
    trigger: 'schedule' | 'on_demand';
    inputs: Record<string, unknown>;
  },
): Promise<string> {
  const runId = randomUUID();
  await tx.insert(reconciliationRuns).values({ ...input, runId });
  return runId;
}

/**
 * Finishes a run with its figures, in the caller's transaction: the figures go in while the run is
 * still 'running', then the run is finished. The database refuses both steps on a run that is
 * already finished or failed, and any change afterwards.
 */
export async function finishRun(
  tx: Tx,
  input: {
    tenantId: string;
    runId: string;
    figures: RunFigure[];
    result: RunResult;
    breaksOpened: number;
    note?: string | null;
  },
): Promise<void> {
  if (input.figures.length > 0) {
    await tx.insert(reconciliationRunFigures).values(
      input.figures.map((figure) => ({
        tenantId: input.tenantId,
        runId: input.runId,
        place: figure.place,
        assetCode: figure.assetCode,
        liabilitiesAvailableMinor: figure.liabilitiesAvailableMinor,
        liabilitiesHeldMinor: figure.liabilitiesHeldMinor,
        custodyControlMinor: figure.custodyControlMinor,
        feeExpenseMinor: figure.feeExpenseMinor,
        inFlightWithdrawalsMinor: figure.inFlightWithdrawalsMinor,
        expectedMinor: figure.expectedMinor,
        observedMinor: figure.observedMinor,
        explainedMinor: figure.explainedMinor,
        unexplainedMinor: figure.unexplainedMinor,
        explanations: figure.explanations,
        pinnedBlock: figure.pinnedBlock,
        reportedAt: figure.reportedAt ? new Date(figure.reportedAt) : null,
        accountTenants: figure.accountTenants,
        breakId: figure.breakId,
      })),
    );
  }
  await closeRun(tx, input.tenantId, input.runId, {
    status: 'finished',
    result: input.result,
    breaksOpened: input.breaksOpened,
    note: input.note ?? null,
  });
}

/** Records that a run could not finish (a node or custodian that did not answer), and why. */
export async function failRun(tx: Tx, input: { tenantId: string; runId: string; note: string }) {
  await closeRun(tx, input.tenantId, input.runId, {
    status: 'failed',
    result: null,
    breaksOpened: 0,
    note: input.note,
  });
}

async function closeRun(
  tx: Tx,
  tenantId: string,
  runId: string,
  outcome: {
    status: 'finished' | 'failed';
    result: RunResult | null;
    breaksOpened: number;
    note: string | null;
  },
): Promise<void> {
  const updated = await tx
    .update(reconciliationRuns)
    .set({ ...outcome, finishedAt: new Date() })
    .where(
      and(
        eq(reconciliationRuns.tenantId, tenantId),
        eq(reconciliationRuns.runId, runId),
        eq(reconciliationRuns.status, 'running'),
      ),
    )
    .returning({ runId: reconciliationRuns.runId });
  if (updated.length !== 1) throw new IdemError('NOT_FOUND', 'no running reconciliation run with this id');
}

export async function listRuns(
  tx: Tx,
  input: { tenantId: string; limit?: number },
): Promise<ReconciliationRun[]> {
  const rows = await tx
    .select()
    .from(reconciliationRuns)
    .where(eq(reconciliationRuns.tenantId, input.tenantId))
    .orderBy(desc(reconciliationRuns.startedAt))
    .limit(Math.min(Math.max(input.limit ?? 50, 1), 200));
  return rows.map(toRunView);
}

/** A run with its figures, or NOT_FOUND. */
export async function getRun(
  tx: Tx,
  input: { tenantId: string; runId: string },
): Promise<ReconciliationRunDetail> {
  const [run] = await tx
    .select()
    .from(reconciliationRuns)
    .where(and(eq(reconciliationRuns.tenantId, input.tenantId), eq(reconciliationRuns.runId, input.runId)));
  if (!run) throw new IdemError('NOT_FOUND', 'no reconciliation run with this id');
  const figures = await tx
    .select()
    .from(reconciliationRunFigures)
    .where(
      and(
        eq(reconciliationRunFigures.tenantId, input.tenantId),
        eq(reconciliationRunFigures.runId, input.runId),
      ),
    )
    .orderBy(asc(reconciliationRunFigures.place), asc(reconciliationRunFigures.assetCode));
  return { ...toRunView(run), figures: figures.map(toFigureView) };
}

/**
 * Ledger against observed per place and asset over the last `limit` finished runs, oldest first:
 * what the staff screen charts.
 */
export async function runHistory(
  tx: Tx,
  input: { tenantId: string; limit?: number },
): Promise<RunHistoryPoint[]> {
  const runs = await tx
    .select({ runId: reconciliationRuns.runId, finishedAt: reconciliationRuns.finishedAt })
    .from(reconciliationRuns)
    .where(and(eq(reconciliationRuns.tenantId, input.tenantId), eq(reconciliationRuns.status, 'finished')))
    .orderBy(desc(reconciliationRuns.startedAt))
    .limit(Math.min(Math.max(input.limit ?? 30, 1), 200));
  if (runs.length === 0) return [];
  const finishedAt = new Map(runs.map((run) => [run.runId, run.finishedAt?.toISOString() ?? '']));
  const figures = await tx
    .select({
      runId: reconciliationRunFigures.runId,
      place: reconciliationRunFigures.place,
      assetCode: reconciliationRunFigures.assetCode,
      expectedMinor: reconciliationRunFigures.expectedMinor,
      observedMinor: reconciliationRunFigures.observedMinor,
    })
    .from(reconciliationRunFigures)
    .where(
      and(
        eq(reconciliationRunFigures.tenantId, input.tenantId),
        inArray(
          reconciliationRunFigures.runId,
          runs.map((run) => run.runId),
        ),
      ),
    );
  return figures
    .map((figure) => ({ ...figure, finishedAt: finishedAt.get(figure.runId) ?? '' }))
    .sort((a, b) => a.finishedAt.localeCompare(b.finishedAt));
}

function toRunView(row: RunRow): ReconciliationRun {
  return {
    runId: row.runId,
    tenantId: row.tenantId,
    ranBy: row.ranBy,
    trigger: row.trigger as ReconciliationRun['trigger'],
    inputs: row.inputs as Record<string, unknown>,
    status: row.status as ReconciliationRun['status'],
    result: row.result as RunResult | null,
    breaksOpened: row.breaksOpened,
    note: row.note,
    startedAt: row.startedAt.toISOString(),
    finishedAt: row.finishedAt?.toISOString() ?? null,
  };
}

function toFigureView(row: FigureRow): RunFigure {
  return {
    place: row.place,
    assetCode: row.assetCode,
    liabilitiesAvailableMinor: row.liabilitiesAvailableMinor,
    liabilitiesHeldMinor: row.liabilitiesHeldMinor,
    custodyControlMinor: row.custodyControlMinor,
    feeExpenseMinor: row.feeExpenseMinor,
    inFlightWithdrawalsMinor: row.inFlightWithdrawalsMinor,
    expectedMinor: row.expectedMinor,
    observedMinor: row.observedMinor,
    explainedMinor: row.explainedMinor,
    unexplainedMinor: row.unexplainedMinor,
    explanations: row.explanations as RunFigure['explanations'],
    pinnedBlock: row.pinnedBlock,
    reportedAt: row.reportedAt?.toISOString() ?? null,
    accountTenants: row.accountTenants,
    breakId: row.breakId,
  };
}
