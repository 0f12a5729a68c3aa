import {
  attemptsByOperation,
  type BreakClass,
  balancesDifferingFromPostings,
  closeBreak,
  getHotWallet,
  networkFeesExpensed,
  type Operation,
  openBreak,
  openBreaksOfClass,
  type ReconciliationBreak,
  rowsOf,
  schema,
  withTenant,
} from '@idem/core';
import type { CustodianTransfer } from '@idem/rails';
import { and, asc, eq, gt, inArray, type SQL, sql } from 'drizzle-orm';
import { decodeFunctionData, erc20Abi, type Hex } from 'viem';
import { assetOf } from './candidates.ts';
import type { WorkerContext } from './context.ts';
import { custodianTermsDiffer } from './custodian-terms.ts';
import { NATIVE_ASSETS, routeFor } from './rails.ts';

const { assets, operations } = schema;

export interface Finding {
  breakClass: BreakClass;
  subject: string;
  reason: string;
  assetCode?: string | null;
  ledgerAmountMinor?: string | null;
  observedAmountMinor?: string | null;
  /** What else a person needs (which terms differ, the provider's id); stored with the break. */
  details?: Record<string, unknown>;
}

export interface ReconciliationReport {
  tenantId: string;
  checkedOperations: number;
  checkedCustodianTransfers: number;
  findings: Finding[];
  /** New breaks, escalations included. */
  breaksOpened: number;
  /** Timing breaks closed because the item arrived. */
  breaksClosed: number;
  /** Timing breaks escalated to genuine_variance. */
  breaksEscalated: number;
}

/**
 * How far back settled withdrawals are compared, and, for every asset at once, how long a lag
 * counts as timing (tests; otherwise each asset's `reconciliation_window_seconds`).
 */
export interface ReconciliationOptions {
  windowHours?: number;
  timingWindowMs?: number;
}

/** The window of an asset the ledger does not list (should not happen): the column's default. */
const WINDOW_MS_DEFAULT = 3_600_000;
const OPERATIONS_PAGE = 5_000;

const SETTLED_OR_SENT: Operation['state'][] = [
  'BROADCAST',
  'UNKNOWN',
  'CONFIRMED',
  'VERIFIED_NOT_SENT',
  'FAILED_TERMINAL',
];

/**
 * Three-way reconciliation (C21): the ledger's withdrawals against the custodian's records and the
 * chain. Every difference becomes a break with a class and an owner; nothing here, or anywhere,
 * adjusts a balance because of a break. Also checks the ledger against itself (entries balance,
 * balances equal their postings), which must never fail.
 *
 * Break lifecycle: a difference on an operation younger than its asset's window is
 * `timing`; older, or a timing break older than the window, is `genuine_variance` and escalates
 * the timing break (a new linked break, an alert). A timing break whose operation now matches
 * closes itself as `arrived` with the evidence of the match.
 */
export async function reconcileTenant(
  ctx: WorkerContext,
  tenantId: string,
  options: ReconciliationOptions = {},
): Promise<ReconciliationReport> {
  const windowHours = options.windowHours ?? 72;
  const windows = await assetWindows(ctx, tenantId);
  const windowOf = (assetCode: string | null | undefined): number =>
    options.timingWindowMs ?? windows.get(assetCode ?? '') ?? WINDOW_MS_DEFAULT;
  const timingBreaks = await withTenant(ctx.db, tenantId, (tx) =>
    openBreaksOfClass(tx, { tenantId, breakClass: 'timing' }),
  );
  const ops = await operationsToCompare(ctx, tenantId, windowHours, timingBreaks);
  const young = (op: Operation) => ctx.now() - op.updatedAt.getTime() < windowOf(op.assetCode);

  const findings: Finding[] = [];
  /** Operations compared with their rail, and what the rail showed: the evidence when a timing break closes. */
  const matched = new Map<string, Record<string, unknown>>();
  let checkedCustodianTransfers = 0;
  const custodianOps = ops.filter((op) => routeFor(op.network).kind === 'custodian');
  if (ctx.rails.config.custodian) {
    const transfers = await ctx.rails.custodian().listTransfers();
    checkedCustodianTransfers = transfers.length;
    findings.push(...(await compareCustodian(ctx, tenantId, custodianOps, transfers, young, matched)));
  }
  const evmOps = ops.filter((op) => routeFor(op.network).kind === 'evm' && op.txHash);
  if (ctx.rails.config.evm) findings.push(...(await compareChain(ctx, tenantId, evmOps, young, matched)));
  findings.push(...(await checkLedgerItself(ctx, tenantId)));

  // A timing difference that outlived its asset's window is no longer timing.
  const openTiming = new Map(timingBreaks.map((b) => [b.subject, b]));
  for (const finding of findings) {
    const open = openTiming.get(finding.subject);
    const windowMs = windowOf(finding.assetCode);
    if (finding.breakClass === 'timing' && open && ctx.now() - open.openedAt.getTime() >= windowMs) {
      finding.breakClass = 'genuine_variance';
      finding.reason = `not resolved within the asset's window of ${windowMs / 1000} s: ${finding.reason}`;
    }
  }

  let breaksOpened = 0;
  let breaksEscalated = 0;
  for (const finding of findings) {
    const result = await withTenant(ctx.db, tenantId, (tx) =>
      openBreak(tx, {
        tenantId,
        breakClass: finding.breakClass,
        subject: finding.subject,
        assetCode: finding.assetCode ?? null,
        ledgerAmountMinor: finding.ledgerAmountMinor ?? null,
        observedAmountMinor: finding.observedAmountMinor ?? null,
        details: { ...finding.details, reason: finding.reason, foundBy: ctx.workerId },
      }),
    );
    if (!result.opened) continue;
    breaksOpened += 1;
    if (result.escalated) {
      breaksEscalated += 1;
      ctx.log.error(
        {
          alert: true,
          tenantId,
          breakId: result.break.breakId,
          escalatedFrom: result.escalated.breakId,
          ...finding,
        },
        'ALERT reconciliation timing break escalated to a genuine variance',
      );
    } else {
      ctx.log.warn(
        {
          alert: finding.breakClass === 'genuine_variance',
          tenantId,
          breakId: result.break.breakId,
          ...finding,
        },
        'reconciliation break opened',
      );
    }
  }

  // The item arrived: a timing break whose operation was compared and now matches closes itself.
  const found = new Set(findings.map((f) => f.subject));
  let breaksClosed = 0;
  for (const open of timingBreaks) {
    const evidence = matched.get(open.subject.replace(/^operation:/, ''));
    if (!open.subject.startsWith('operation:') || found.has(open.subject) || !evidence) continue;
    await withTenant(ctx.db, tenantId, (tx) =>
      closeBreak(tx, {
        tenantId,
        breakId: open.breakId,
        closedBy: ctx.workerId,
        closedAs: 'arrived',
        evidence: {
          reason: 'the ledger and the rail agree',
          ...evidence,
          checkedAt: new Date().toISOString(),
        },
      }),
    );
    breaksClosed += 1;
    ctx.log.info(
      { tenantId, breakId: open.breakId, subject: open.subject },
      'timing break closed: the item arrived',
    );
  }
  return {
    tenantId,
    checkedOperations: ops.length,
    checkedCustodianTransfers,
    findings,
    breaksOpened,
    breaksClosed,
    breaksEscalated,
  };
}

async function assetWindows(ctx: WorkerContext, tenantId: string): Promise<Map<string, number>> {
  const rows = await withTenant(ctx.db, tenantId, (tx) =>
    tx
      .select({ code: assets.code, seconds: assets.reconciliationWindowSeconds })
      .from(assets)
      .where(eq(assets.tenantId, tenantId)),
  );
  return new Map(rows.map((row) => [row.code, row.seconds * 1000]));
}

/**
 * Every withdrawal sent or settled within the window, page by page (no silent cap), and every
 * operation an open timing break waits on, however old: its break must close or escalate.
 */
async function operationsToCompare(
  ctx: WorkerContext,
  tenantId: string,
  windowHours: number,
  timingBreaks: ReconciliationBreak[],
): Promise<Operation[]> {
  const withdrawals = (...conditions: (SQL | undefined)[]) =>
    withTenant(ctx.db, tenantId, (tx) =>
      tx
        .select()
        .from(operations)
        .where(and(eq(operations.tenantId, tenantId), eq(operations.kind, 'withdrawal'), ...conditions))
        .orderBy(asc(operations.operationId))
        .limit(OPERATIONS_PAGE),
    ) as Promise<Operation[]>;
  const ops: Operation[] = [];
  let after: string | null = null;
  for (;;) {
    const page = await withdrawals(
      inArray(operations.state, SETTLED_OR_SENT),
      gt(operations.updatedAt, sql`now() - make_interval(hours => ${windowHours})`),
      after === null ? undefined : gt(operations.operationId, after),
    );
    ops.push(...page);
    const last = page.at(-1);
    if (page.length < OPERATIONS_PAGE || !last) break;
    after = last.operationId;
  }
  const have = new Set(ops.map((op) => op.operationId));
  const waiting = timingBreaks
    .map((b) => b.subject.replace(/^operation:/, ''))
    .filter((id) => isUuid(id) && !have.has(id));
  for (let start = 0; start < waiting.length; start += OPERATIONS_PAGE) {
    ops.push(
      ...(await withdrawals(inArray(operations.operationId, waiting.slice(start, start + OPERATIONS_PAGE)))),
    );
  }
  return ops;
}

async function compareCustodian(
  ctx: WorkerContext,
  tenantId: string,
  ops: Operation[],
  transfers: CustodianTransfer[],
  young: (op: Operation) => boolean,
  matched: Map<string, Record<string, unknown>>,
): Promise<Finding[]> {
  const findings: Finding[] = [];
  const byReference = new Map<string, CustodianTransfer[]>();
  for (const transfer of transfers) {
    const list = byReference.get(transfer.externalReference);
    if (list) list.push(transfer);
    else byReference.set(transfer.externalReference, [transfer]);
  }
  // Transfers of other tenants on a shared (omnibus) account are not unknown: only a reference
  // that matches no operation anywhere is (asked without reading other tenants' rows).
  const references = [...byReference.keys()].filter(isUuid);
  const unknown = new Set(
    references.length === 0
      ? []
      : rowsOf<{ operation_id: string }>(
          await withTenant(ctx.db, tenantId, (tx) =>
            tx.execute(
              sql`select operation_id::text from idem_unknown_operation_ids(${`{${references.join(',')}}`}::uuid[])`,
            ),
          ),
        ).map((row) => row.operation_id),
  );
  for (const [reference, list] of byReference) {
    if (!isUuid(reference) || unknown.has(reference)) {
      for (const transfer of list) {
        findings.push({
          breakClass: 'unknown_operation',
          subject: `custodian-transfer:${transfer.id}`,
          reason: 'the custodian holds a transfer no withdrawal of ours matches',
          assetCode: transfer.asset,
          observedAmountMinor: transfer.amountMinor,
        });
      }
    }
  }
  for (const op of ops) {
    const list = byReference.get(op.operationId) ?? [];
    const subject = `operation:${op.operationId}`;
    const base = { subject, assetCode: op.assetCode, ledgerAmountMinor: op.amountMinor };
    if (list.length > 1) {
      findings.push({
        ...base,
        breakClass: 'genuine_variance',
        reason: `the custodian holds ${list.length} transfers for one withdrawal`,
      });
      continue;
    }
    const transfer = list[0];
    if (!transfer) {
      if (op.state === 'CONFIRMED' || op.state === 'BROADCAST') {
        findings.push({
          ...base,
          breakClass: young(op) ? 'timing' : 'genuine_variance',
          reason: `ledger says ${op.state} but the custodian has no transfer with our reference`,
          observedAmountMinor: '0',
        });
      } else {
        matched.set(op.operationId, { operationState: op.state, transferStatus: null });
      }
      continue;
    }
    // Our reference under another transfer id, asset, amount, destination or memo: not ours.
    const differs = custodianTermsDiffer(op, transfer);
    if (differs.length > 0) {
      findings.push({
        ...base,
        breakClass: 'genuine_variance',
        reason: `custodian transfer terms differ from the approved payload: ${differs.join(', ')}`,
        observedAmountMinor: transfer.amountMinor,
        details: { differs, providerId: transfer.id, expectedProviderId: op.providerRef },
      });
      continue;
    }
    if (op.state === 'VERIFIED_NOT_SENT' && transfer.status === 'completed') {
      findings.push({
        ...base,
        breakClass: 'genuine_variance',
        reason: 'ledger released the hold but the custodian completed the transfer',
        observedAmountMinor: transfer.amountMinor,
      });
    } else if (op.state === 'CONFIRMED' && transfer.status !== 'completed') {
      findings.push({
        ...base,
        breakClass: 'genuine_variance',
        reason: `ledger says CONFIRMED but the custodian says ${transfer.status}`,
        observedAmountMinor: '0',
      });
    } else if (op.state !== 'CONFIRMED' && transfer.status === 'completed') {
      // The ledger lags the custodian: timing until the asset's window has passed.
      findings.push({
        ...base,
        breakClass: young(op) ? 'timing' : 'genuine_variance',
        reason: `custodian completed the transfer; ledger still ${op.state}`,
        observedAmountMinor: transfer.amountMinor,
      });
    } else {
      matched.set(op.operationId, {
        operationState: op.state,
        transferStatus: transfer.status,
        providerId: transfer.id,
      });
    }
  }
  return findings;
}

async function compareChain(
  ctx: WorkerContext,
  tenantId: string,
  ops: Operation[],
  young: (op: Operation) => boolean,
  matched: Map<string, Record<string, unknown>>,
): Promise<Finding[]> {
  const evm = ctx.rails.config.evm;
  if (!evm || ops.length === 0) return [];
  const chain = ctx.rails.chain();
  const findings: Finding[] = [];
  const fees = await postedNetworkFees(ctx, tenantId, ops);
  const attemptsOf = await withTenant(ctx.db, tenantId, (tx) =>
    attemptsByOperation(
      tx,
      tenantId,
      ops.map((op) => op.operationId),
    ),
  );
  for (const op of ops) {
    const subject = `operation:${op.operationId}`;
    const base = { subject, assetCode: op.assetCode, ledgerAmountMinor: op.amountMinor };
    // Every payment attempt (the original and its fee bumps) could be the one mined; a cancel pays nobody.
    const attempts = attemptsOf.get(op.operationId) ?? [];
    const payments =
      attempts.length > 0 ? attempts.filter((a) => a.kind !== 'cancel').map((a) => a.txHash) : [op.txHash];
    let receipt: Awaited<ReturnType<typeof chain.getTransactionReceipt>> | null = null;
    for (const hash of payments) {
      const found = await chain.getTransactionReceipt({ hash: hash as Hex }).catch(() => null);
      if (found?.status === 'success') {
        receipt = found;
        break;
      }
    }
    const mined = receipt !== null;
    // The hot wallet's native balance falls by the gas of every mined transaction: the ledger
    // explains it only if each confirmation posted exactly its receipt's fee (and nothing else did).
    const posted = fees.get(op.operationId) ?? 0n;
    const paid = receipt && op.state === 'CONFIRMED' ? receipt.gasUsed * receipt.effectiveGasPrice : 0n;
    const feeDiffers = receipt !== null && posted !== paid;
    if (feeDiffers) {
      findings.push({
        subject,
        breakClass: young(op) ? 'timing' : 'genuine_variance',
        reason: `the network fee posted for this withdrawal (${posted} wei) differs from its receipt's gasUsed * effectiveGasPrice`,
        assetCode: NATIVE_ASSETS[op.network] ?? null,
        ledgerAmountMinor: posted.toString(),
        observedAmountMinor: paid.toString(),
      });
    }
    if (op.state === 'CONFIRMED' && !mined) {
      findings.push({
        ...base,
        breakClass: young(op) ? 'timing' : 'genuine_variance',
        reason: 'ledger says CONFIRMED but the chain has no successful transaction',
        observedAmountMinor: '0',
      });
      continue;
    }
    if (op.state === 'VERIFIED_NOT_SENT' && mined) {
      findings.push({
        ...base,
        breakClass: 'genuine_variance',
        reason: 'ledger released the hold but the transaction is on chain',
        observedAmountMinor: op.amountMinor,
      });
      continue;
    }
    if (!receipt) {
      if (!feeDiffers) matched.set(op.operationId, { operationState: op.state, mined: false });
      continue;
    }
    // The transaction on chain must be exactly the approved transfer.
    const [transaction, wallet, asset] = await Promise.all([
      chain.getTransaction({ hash: receipt.transactionHash }),
      withTenant(ctx.db, tenantId, (tx) => getHotWallet(tx, tenantId, op.network)),
      withTenant(ctx.db, tenantId, (tx) => assetOf(tx, op)),
    ]);
    const sent = observedTransfer(transaction, asset.contractAddress);
    const matches =
      transaction.from.toLowerCase() === wallet.address.toLowerCase() &&
      sent !== null &&
      sent.to.toLowerCase() === (op.destination ?? '').toLowerCase() &&
      sent.amount === BigInt(op.amountMinor);
    if (!matches) {
      findings.push({
        ...base,
        breakClass: 'genuine_variance',
        reason: 'the transaction on chain differs from the approved payload',
        observedAmountMinor: sent?.amount.toString() ?? null,
      });
    } else if (!feeDiffers) {
      matched.set(op.operationId, { operationState: op.state, mined: true, txHash: receipt.transactionHash });
    }
  }
  return findings;
}

/** The network fee each operation has expensed, net of reversals (positive: an expense). */
async function postedNetworkFees(
  ctx: WorkerContext,
  tenantId: string,
  ops: Operation[],
): Promise<Map<string, bigint>> {
  if (ops.length === 0) return new Map();
  return withTenant(ctx.db, tenantId, (tx) =>
    networkFeesExpensed(
      tx,
      tenantId,
      ops.map((op) => op.operationId),
    ),
  );
}

function observedTransfer(
  transaction: { to: Hex | null; value: bigint; input: Hex },
  tokenContract: string | null,
): { to: string; amount: bigint } | null {
  if (!tokenContract) return transaction.to ? { to: transaction.to, amount: transaction.value } : null;
  if (transaction.to?.toLowerCase() !== tokenContract.toLowerCase()) return null;
  try {
    const call = decodeFunctionData({ abi: erc20Abi, data: transaction.input });
    if (call.functionName !== 'transfer') return null;
    const [to, amount] = call.args as readonly [Hex, bigint];
    return { to, amount };
  } catch {
    return null;
  }
}

/** The ledger against itself: these must never differ; if they do, a person must know at once. */
async function checkLedgerItself(ctx: WorkerContext, tenantId: string): Promise<Finding[]> {
  return withTenant(ctx.db, tenantId, async (tx) => {
    const mismatched = await balancesDifferingFromPostings(tx);
    return mismatched.map((row) => ({
      breakClass: 'genuine_variance' as const,
      subject: `ledger:${row.accountRef}:${row.assetCode}`,
      reason: 'a balance differs from the sum of its postings',
      assetCode: row.assetCode,
    }));
  });
}

function isUuid(value: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value);
}
