import { type RunFigure, type RunResult, scrubbedError } from '@idem/contracts';
import { custodianAccountOf, failRun, finishRun, openBreak, startRun, withTenant } from '@idem/core';
import type { BalanceContext } from './chain.ts';
import { compareChainPlaces, type PlaceComparison } from './chain.ts';
import { type CustodianAccountPass, custodianComparisons, passCustodianAccount } from './custodian.ts';

export interface BalanceRunOptions {
  /** 'worker:<id>', 'staff:<id>', 'cli:<user>'. */
  ranBy: string;
  trigger: 'schedule' | 'on_demand';
  /**
   * Custodian account passes already made in this worker pass, by account: a shared account is
   * observed and summed once for all its tenants, not once per tenant.
   */
  accountPasses?: Map<string, Promise<CustodianAccountPass>>;
}

export interface BalanceRunReport {
  runId: string;
  tenantId: string;
  result: RunResult | null;
  breaksOpened: number;
  figures: RunFigure[];
  note: string | null;
}

/** A variance outranks an unobserved place, which outranks an explained difference. */
function resultOf(figures: RunFigure[]): RunResult {
  if (figures.length === 0) return 'incomplete';
  if (figures.some((f) => f.unexplainedMinor !== null && f.unexplainedMinor !== '0')) return 'variance';
  if (figures.some((f) => f.observedMinor === null)) return 'incomplete';
  if (figures.some((f) => f.explainedMinor !== '0')) return 'explained';
  return 'balanced';
}

function toFigure(comparison: PlaceComparison): RunFigure {
  const explained = comparison.explanations.reduce((sum, item) => sum + BigInt(item.amountMinor), 0n);
  const unexplained =
    comparison.observed === null ? null : comparison.observed - comparison.expected - explained;
  return {
    place: comparison.place,
    assetCode: comparison.assetCode,
    liabilitiesAvailableMinor: comparison.ledger.liabilitiesAvailable.toString(),
    liabilitiesHeldMinor: comparison.ledger.liabilitiesHeld.toString(),
    custodyControlMinor: comparison.ledger.custodyControl.toString(),
    feeExpenseMinor: comparison.ledger.feeExpense.toString(),
    inFlightWithdrawalsMinor: comparison.ledger.inFlightWithdrawals.toString(),
    expectedMinor: comparison.expected.toString(),
    observedMinor: comparison.observed?.toString() ?? null,
    explainedMinor: explained.toString(),
    unexplainedMinor: unexplained?.toString() ?? null,
    explanations: comparison.explanations,
    pinnedBlock: comparison.pinnedBlock,
    reportedAt: comparison.reportedAt,
    accountTenants: comparison.accountTenants,
    breakId: null,
  };
}

async function compareAll(
  ctx: BalanceContext,
  tenantId: string,
  accountPasses: Map<string, Promise<CustodianAccountPass>>,
): Promise<{ figures: RunFigure[]; unobserved: string[]; account: string | null }> {
  const comparisons = await compareChainPlaces(ctx, tenantId);
  let account: string | null = null;
  if (ctx.rails.config.custodian) {
    account = await withTenant(ctx.db, tenantId, (tx) => custodianAccountOf(tx, tenantId));
    let pass = accountPasses.get(account);
    if (!pass) {
      pass = passCustodianAccount(ctx, account);
      accountPasses.set(account, pass);
    }
    // A failed pass is dropped so the next tenant's run (or the confirming comparison) asks again.
    pass.catch(() => accountPasses.delete(account ?? ''));
    comparisons.push(...(await custodianComparisons(ctx, tenantId, await pass)));
  }
  return {
    figures: comparisons.map(toFigure),
    unobserved: [...new Set(comparisons.flatMap((c) => (c.unobservedReason ? [c.unobservedReason] : [])))],
    account,
  };
}

/**
 * Balance-level reconciliation of one tenant (C21): for every asset and holding place,
 * the ledger's figure against the balance observed on chain at a pinned block or reported by the
 * custodian, explained by in-flight items; what remains is a `genuine_variance` break with the
 * amounts, the block or report time and an owner. A difference must be seen by two comparisons in
 * a row (the second made afresh) before it is a break: the ledger and the chain are read one after
 * the other, and an item that moves between the two reads is timing, not a variance. Nothing here
 * adjusts a balance. The run and its figures are stored either way.
 */
export async function reconcileBalances(
  ctx: BalanceContext,
  tenantId: string,
  options: BalanceRunOptions,
): Promise<BalanceRunReport> {
  const requestedAt = new Date().toISOString();
  let compared: Awaited<ReturnType<typeof compareAll>>;
  try {
    compared = await compareAll(ctx, tenantId, options.accountPasses ?? new Map());
    if (resultOf(compared.figures) === 'variance') {
      compared = await compareAll(ctx, tenantId, new Map());
    }
  } catch (error) {
    const note = `the run could not compare: ${scrubbedError(error, 200)}`;
    const runId = await withTenant(ctx.db, tenantId, async (tx) => {
      const id = await startRun(tx, {
        tenantId,
        ranBy: options.ranBy,
        trigger: options.trigger,
        inputs: { requestedAt },
      });
      await failRun(tx, { tenantId, runId: id, note });
      return id;
    });
    ctx.log.warn({ tenantId, runId, message: note }, 'balance reconciliation failed');
    return { runId, tenantId, result: null, breaksOpened: 0, figures: [], note };
  }
  const { figures, unobserved, account } = compared;
  const inputs = {
    requestedAt,
    pinnedBlocks: Object.fromEntries(
      figures.filter((f) => f.pinnedBlock !== null).map((f) => [f.place, f.pinnedBlock]),
    ),
    reportedAt: Object.fromEntries(
      figures.filter((f) => f.reportedAt !== null).map((f) => [f.place, f.reportedAt]),
    ),
    custodianAccount: account,
  };
  const result = resultOf(figures);
  if (figures.length === 0)
    unobserved.push('no holding place to observe: no rail configured, or no hot wallet or custodian asset');
  const note = unobserved.length > 0 ? unobserved.join('; ').slice(0, 1_000) : null;
  const stored = await withTenant(ctx.db, tenantId, async (tx) => {
    const runId = await startRun(tx, { tenantId, ranBy: options.ranBy, trigger: options.trigger, inputs });
    let breaksOpened = 0;
    for (const figure of figures) {
      if (figure.unexplainedMinor === null || figure.unexplainedMinor === '0') continue;
      const opened = await openBreak(tx, {
        tenantId,
        breakClass: 'genuine_variance',
        subject: `balance:${figure.place}:${figure.assetCode}`,
        assetCode: figure.assetCode,
        ledgerAmountMinor: figure.expectedMinor,
        observedAmountMinor: figure.observedMinor,
        details: {
          reason: 'the balance held differs from the ledger by more than in-flight items explain',
          runId,
          place: figure.place,
          pinnedBlock: figure.pinnedBlock,
          reportedAt: figure.reportedAt,
          explainedMinor: figure.explainedMinor,
          unexplainedMinor: figure.unexplainedMinor,
          explanations: figure.explanations.slice(0, 50),
          accountTenants: figure.accountTenants,
          foundBy: options.ranBy,
        },
      });
      figure.breakId = opened.break.breakId;
      if (opened.opened) breaksOpened += 1;
    }
    await finishRun(tx, { tenantId, runId, figures, result, breaksOpened, note });
    return { runId, breaksOpened };
  });
  for (const figure of figures.filter((f) => f.unexplainedMinor !== null && f.unexplainedMinor !== '0')) {
    ctx.log.warn(
      {
        alert: true,
        tenantId,
        runId: stored.runId,
        place: figure.place,
        assetCode: figure.assetCode,
        unexplainedMinor: figure.unexplainedMinor,
        breakId: figure.breakId,
      },
      'balance reconciliation: genuine variance',
    );
  }
  return { runId: stored.runId, tenantId, result, breaksOpened: stored.breaksOpened, figures, note };
}
