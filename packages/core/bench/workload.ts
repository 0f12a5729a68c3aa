import { randomBytes } from 'node:crypto';
import { LatencyRecorder, type LatencySummary } from '@idem/testing/bench';
import { sql } from 'drizzle-orm';
import { getAddress } from 'viem';
import {
  createTenant,
  createWithdrawal,
  creditAsOperator,
  type Database,
  rowsOf,
  submitWithdrawal,
  withTenant,
} from '../src/index.ts';
import { runTimed, type TimedResult } from './phase.ts';

const ASSET = 'ETH';
/** Every account starts with far more than a run can withdraw: no intake is refused for funds. */
const FUNDING = 10n ** 30n;
const DESTINATIONS = Array.from({ length: 64 }, () => getAddress(`0x${randomBytes(20).toString('hex')}`));

export interface PhaseOutcome extends TimedResult {
  /** Correctness problems found after the phase; empty when the database holds what was reported. */
  violations: string[];
}

/** A tenant with `accounts` accounts, each credited through the real deposit path. */
export async function fundedTenant(db: Database, name: string, accounts: number, concurrency: number) {
  const { tenantId } = await createTenant(db, { name });
  const accountIds = Array.from({ length: accounts }, (_, i) => `acct-${i}`);
  for (let i = 0; i < accountIds.length; i += concurrency) {
    await Promise.all(
      accountIds.slice(i, i + concurrency).map((accountId) =>
        // As the deployment's operator: the application's role credits nothing without evidence.
        creditAsOperator(db, {
          tenantId,
          deposit: {
            reference: `fund-${accountId}`,
            accountId,
            asset: ASSET,
            amountMinor: FUNDING.toString(),
          },
          idempotencyKey: `deposit-fund-${accountId}`,
          actor: 'bench',
        }),
      ),
    );
  }
  return { tenantId, accountIds };
}

/**
 * How a creation is issued: `statement` is `submitWithdrawal` (what the server calls: one
 * statement, its own transaction); `transaction` is `createWithdrawal` inside a caller's
 * `withTenant` transaction (BEGIN, tenant binding, context read, the call, COMMIT).
 */
export type CreationMode = 'statement' | 'transaction';

/**
 * Withdrawal creation through the real core path, one transaction and a fresh key per call,
 * spread over `accountIds` (one account makes it the hot-account phase). Afterwards the database
 * must hold exactly the successful calls, and every account's hold their amounts.
 */
export async function creationPhase(
  db: Database,
  options: {
    tenantId: string;
    accountIds: string[];
    concurrency: number;
    warmupMs: number;
    measureMs: number;
    label: string;
    mode: CreationMode;
  },
): Promise<PhaseOutcome> {
  const { tenantId, accountIds } = options;
  const expectedHeld = new Map<string, bigint>(accountIds.map((id) => [id, 0n]));
  const result = await runTimed({
    concurrency: options.concurrency,
    warmupMs: options.warmupMs,
    measureMs: options.measureMs,
    call: async (worker, seq) => {
      const accountId = accountIds[Math.floor(Math.random() * accountIds.length)] ?? 'acct-0';
      const amount = 1000n + BigInt(seq % 997);
      const withdrawalId = `${options.label}-${worker}-${seq}`;
      const input = {
        tenantId,
        idempotencyKey: `withdrawal-${withdrawalId}`,
        request: {
          withdrawalId,
          accountId,
          asset: ASSET,
          destination: DESTINATIONS[seq % DESTINATIONS.length],
          amountMinor: amount.toString(),
        },
      };
      const claim =
        options.mode === 'statement'
          ? await submitWithdrawal(db, input)
          : await withTenant(db, tenantId, (tx) => createWithdrawal(tx, input));
      if (claim.outcome !== 'CREATED' || claim.operation.state !== 'REQUESTED') {
        throw new Error(`fresh key answered ${claim.outcome} ${claim.operation.state}`);
      }
      // Counted only after COMMIT: both modes resolve once the transaction has committed.
      expectedHeld.set(accountId, (expectedHeld.get(accountId) ?? 0n) + amount);
    },
  });
  const violations = await verifyLedger(db, tenantId, result.succeeded, expectedHeld);
  if (result.failed > 0)
    violations.push(`${result.failed} calls failed; first: ${String(result.firstError)}`);
  return { ...result, violations };
}

async function verifyLedger(
  db: Database,
  tenantId: string,
  succeeded: number,
  expectedHeld: Map<string, bigint>,
): Promise<string[]> {
  const violations: string[] = [];
  await withTenant(db, tenantId, async (tx) => {
    const [ops] = rowsOf<{ n: string }>(
      await tx.execute(sql`select count(*)::text as n from operations where kind = 'withdrawal'`),
    );
    if (BigInt(ops?.n ?? -1) !== BigInt(succeeded)) {
      violations.push(`operations ${ops?.n} != successful submissions ${succeeded}`);
    }
    const rows = rowsOf<{ account_ref: string; available: string; held: string }>(
      await tx.execute(
        sql`select account_ref, available::text, held::text from balances where asset_code = ${ASSET}`,
      ),
    );
    for (const row of rows) {
      const held = BigInt(row.held);
      const available = BigInt(row.available);
      if (held < 0n || available < 0n) violations.push(`${row.account_ref} has a negative balance`);
      const expected = expectedHeld.get(row.account_ref) ?? 0n;
      if (held !== expected) violations.push(`${row.account_ref} held ${held} != sum of amounts ${expected}`);
      if (available + held !== FUNDING) violations.push(`${row.account_ref} available + held != funding`);
    }
    if (rows.length !== expectedHeld.size)
      violations.push(`${rows.length} balance rows, expected ${expectedHeld.size}`);
  });
  return violations;
}

export interface StormOutcome {
  calls: number;
  seconds: number;
  opsPerSec: number;
  latency: LatencySummary;
  created: number;
  replayed: number;
  failed: number;
  violations: string[];
}

/**
 * `callers` concurrent submissions of one key and one payload, repeated `rounds` times with a
 * fresh key: each round must leave exactly one operation and one hold, and answer every caller.
 */
export async function stormPhase(
  db: Database,
  options: { tenantId: string; accountId: string; callers: number; rounds: number },
): Promise<StormOutcome> {
  const { tenantId, accountId } = options;
  const latency = new LatencyRecorder();
  const amount = 12_345n;
  let created = 0;
  let replayed = 0;
  let failed = 0;
  const violations: string[] = [];
  const started = performance.now();
  for (let round = 0; round < options.rounds; round += 1) {
    const withdrawalId = `storm-${round}-${randomBytes(4).toString('hex')}`;
    const idempotencyKey = `withdrawal-${withdrawalId}`;
    const request = {
      withdrawalId,
      accountId,
      asset: ASSET,
      destination: DESTINATIONS[round % DESTINATIONS.length],
      amountMinor: amount.toString(),
    };
    const outcomes = await Promise.allSettled(
      Array.from({ length: options.callers }, () =>
        latency.time(() => submitWithdrawal(db, { tenantId, request, idempotencyKey })),
      ),
    );
    const ids = new Set<string>();
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') {
        failed += 1;
        if (failed === 1) violations.push(`a storm caller failed: ${String(outcome.reason)}`);
        continue;
      }
      ids.add(outcome.value.operation.operationId);
      if (outcome.value.outcome === 'CREATED') created += 1;
      else replayed += 1;
    }
    const [stored] = await withTenant(db, tenantId, async (tx) =>
      rowsOf<{ n: string }>(
        await tx.execute(
          sql`select count(*)::text as n from operations where idempotency_key = ${idempotencyKey}`,
        ),
      ),
    );
    if (stored?.n !== '1') violations.push(`round ${round}: ${stored?.n} operations under one key`);
    if (ids.size !== 1) violations.push(`round ${round}: callers saw ${ids.size} different operations`);
  }
  const seconds = (performance.now() - started) / 1000;
  if (created !== options.rounds) violations.push(`${created} CREATED answers over ${options.rounds} rounds`);
  const [balance] = await withTenant(db, tenantId, async (tx) =>
    rowsOf<{ held: string; available: string }>(
      await tx.execute(
        sql`select held::text, available::text from balances where account_ref = ${accountId} and asset_code = ${ASSET}`,
      ),
    ),
  );
  const expectedHeld = amount * BigInt(options.rounds);
  if (BigInt(balance?.held ?? -1) !== expectedHeld)
    violations.push(`storm account held ${balance?.held} != ${expectedHeld}`);
  if (BigInt(balance?.available ?? -1) !== FUNDING - expectedHeld)
    violations.push('storm account available is wrong');
  const calls = options.callers * options.rounds;
  return {
    calls,
    seconds,
    opsPerSec: calls / seconds,
    latency: latency.summary(),
    created,
    replayed,
    failed,
    violations,
  };
}
