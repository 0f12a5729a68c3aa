import type { OperationState } from '@idem/contracts';
import { IdemError } from '@idem/contracts';
import { and, eq, type SQL, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { operations, operationTransitions } from '../db/schema/index.ts';
import { type Posting, postEntry, SYSTEM_ACCOUNTS } from '../journal/post-entry.ts';
import { findOperation, type Operation } from '../operations/operation-record.ts';
import { enqueue } from '../outbox/enqueue.ts';
import { findEdge, type LedgerEffect, SETTLED_STATES } from './transitions.ts';

export interface TransitionContext {
  /** Who acts: a worker id, 'system:reconciler', 'staff:<id>'. Recorded in the history. */
  actor: string;
  reason: string;
  evidence?: Record<string, unknown>;
  /** For lease-holder moves: the generation from `leaseForSigning`. A newer lease makes this write stale. */
  leaseGeneration?: number;
  /** Columns set together with the state (within what the guard trigger allows). */
  set?: Partial<
    Pick<
      Operation,
      | 'rejectionCode'
      | 'signedArtifact'
      | 'txHash'
      | 'owner'
      | 'chainNonce'
      | 'providerRef'
      | 'providerTxHash'
    >
  > & {
    clearLease?: boolean;
  };
  /** Extra conditions for the conditional UPDATE (e.g. "nothing signed yet"). */
  where?: SQL[];
  /**
   * The gas the mined transaction paid (receipt: gasUsed * effectiveGasPrice), in the network's
   * native asset. Posted with a settle from custody to '@network_fees' (docs/LEDGER.md).
   */
  networkFee?: { assetCode: string; amountMinor: bigint };
}

/**
 * Moves an operation from the state it was read in to `to`, by one conditional UPDATE on
 * (state, version, payload hash [, lease generation]), then writes the history row, the journal
 * entry the edge demands and the outbox notification, all in the caller's transaction.
 * A concurrent change makes the UPDATE match nothing: STALE_WRITE, and nothing is written.
 */
export async function transition(
  tx: Tx,
  op: Operation,
  to: OperationState,
  ctx: TransitionContext,
): Promise<Operation> {
  const edge = findEdge(op.kind, op.state, to);
  if (!edge) {
    throw new IdemError('INVALID_TRANSITION', `a ${op.kind} cannot move from ${op.state} to ${to}`);
  }
  const conditions: SQL[] = [
    eq(operations.tenantId, op.tenantId),
    eq(operations.operationId, op.operationId),
    eq(operations.state, op.state),
    eq(operations.version, op.version),
    eq(operations.payloadHash, op.payloadHash),
    ...(ctx.where ?? []),
  ];
  if (ctx.leaseGeneration !== undefined) conditions.push(eq(operations.leaseGeneration, ctx.leaseGeneration));
  const { clearLease, ...columns } = ctx.set ?? {};
  const updated = await tx
    .update(operations)
    .set({
      ...columns,
      state: to,
      version: sql`${operations.version} + 1`,
      updatedAt: sql`now()`,
      settledAt: SETTLED_STATES.includes(to) ? sql`now()` : null,
      ...(clearLease ? { leaseOwner: null, leaseExpiresAt: null } : {}),
    })
    .where(and(...conditions))
    .returning();
  const next = updated[0] as Operation | undefined;
  if (!next) {
    const current = await findOperation(tx, op.tenantId, op.operationId);
    if (!current) throw new IdemError('NOT_FOUND', 'operation not found');
    throw new IdemError(
      'STALE_WRITE',
      `operation changed since it was read (now ${current.state}, version ${current.version}); the move to ${to} was not applied`,
    );
  }
  await recordTransition(tx, next, op.state, ctx);
  await applyLedgerEffect(tx, next, edge.effect);
  if (edge.effect === 'settle' && ctx.networkFee) await postNetworkFee(tx, next, ctx.networkFee);
  if (edge.effect === 'unsettle') await reverseNetworkFees(tx, next);
  return next;
}

/** Appends the history row and the tenant notification for a change already applied. */
export async function recordTransition(
  tx: Tx,
  next: Operation,
  from: OperationState | null,
  ctx: Pick<TransitionContext, 'actor' | 'reason' | 'evidence' | 'leaseGeneration'> & { notify?: boolean },
): Promise<void> {
  await tx.insert(operationTransitions).values({
    tenantId: next.tenantId,
    operationId: next.operationId,
    seq: next.version,
    fromState: from,
    toState: next.state,
    actor: ctx.actor,
    reason: ctx.reason,
    evidence: ctx.evidence ?? null,
    leaseGeneration: ctx.leaseGeneration ?? null,
  });
  if (ctx.notify === false) return;
  await enqueue(tx, {
    tenantId: next.tenantId,
    topic: 'operation.state_changed',
    operationId: next.operationId,
    payload: { operationId: next.operationId, from, to: next.state, version: next.version },
  });
}

async function applyLedgerEffect(tx: Tx, op: Operation, effect: LedgerEffect): Promise<void> {
  if (effect === 'none') return;
  const amount = BigInt(op.amountMinor);
  const customer = (bucket: 'available' | 'held', sign: bigint): Posting => ({
    account: op.accountRef,
    bucket,
    assetCode: op.assetCode,
    amount: sign * amount,
  });
  const custody = (sign: bigint): Posting => ({
    account: SYSTEM_ACCOUNTS.custody,
    bucket: 'control',
    assetCode: op.assetCode,
    amount: sign * amount,
  });
  const postingsFor: Record<Exclude<LedgerEffect, 'none'>, Posting[]> = {
    release: [customer('held', -1n), customer('available', 1n)],
    settle: [customer('held', -1n), custody(1n)],
    unsettle: [custody(-1n), customer('held', 1n)],
    reverse_credit: [customer('available', -1n), custody(1n)],
  };
  const result = await postEntry(tx, {
    tenantId: op.tenantId,
    operationId: op.operationId,
    kind: effect,
    postings: postingsFor[effect],
  });
  if (result.ok) return;
  // A reversed deposit may already be spent: refuse, and let the caller record a break.
  if (effect === 'reverse_credit') {
    throw new IdemError('INSUFFICIENT_FUNDS', 'the reversed deposit has already been spent from the account');
  }
  // The hold covers every non-settled withdrawal, so releasing or settling it cannot fail; if it
  // does, the ledger is inconsistent and the transaction must not commit.
  throw new Error(`ledger effect ${effect} refused for operation ${op.operationId}: hold missing`);
}

/**
 * The gas paid for a confirmed withdrawal: custody gave it up (what we hold on chain fell by it)
 * and the tenant's network-fee expense took it. Once per confirmation: the database refuses a
 * second fee entry for an operation that has not been reversed
 * (core/sql/idem_check_network_fee_entry.sql).
 */
async function postNetworkFee(
  tx: Tx,
  op: Operation,
  fee: { assetCode: string; amountMinor: bigint },
): Promise<void> {
  if (fee.amountMinor < 0n) throw new Error(`negative network fee for operation ${op.operationId}`);
  if (fee.amountMinor === 0n) return;
  await postEntry(tx, {
    tenantId: op.tenantId,
    operationId: op.operationId,
    kind: 'network_fee',
    postings: [
      {
        account: SYSTEM_ACCOUNTS.custody,
        bucket: 'control',
        assetCode: fee.assetCode,
        amount: fee.amountMinor,
      },
      {
        account: SYSTEM_ACCOUNTS.networkFees,
        bucket: 'control',
        assetCode: fee.assetCode,
        amount: -fee.amountMinor,
      },
    ],
  });
}

/** A reorganisation undid the confirmation: the fee posted for it is reversed by a compensating entry. */
async function reverseNetworkFees(tx: Tx, op: Operation): Promise<void> {
  const rows = rowsOf<{ asset_code: string; net: string }>(
    await tx.execute(sql`
      select p.asset_code, sum(p.amount)::text as net
        from postings p
        join journal_entries e on e.tenant_id = p.tenant_id and e.entry_id = p.entry_id
       where e.tenant_id = ${op.tenantId}::uuid and e.operation_id = ${op.operationId}::uuid
         and p.account = ${SYSTEM_ACCOUNTS.networkFees}
       group by p.asset_code
      having sum(p.amount) <> 0`),
  );
  for (const row of rows) {
    const expensed = -BigInt(row.net);
    await postEntry(tx, {
      tenantId: op.tenantId,
      operationId: op.operationId,
      kind: 'network_fee_reversal',
      postings: [
        {
          account: SYSTEM_ACCOUNTS.networkFees,
          bucket: 'control',
          assetCode: row.asset_code,
          amount: expensed,
        },
        { account: SYSTEM_ACCOUNTS.custody, bucket: 'control', assetCode: row.asset_code, amount: -expensed },
      ],
    });
  }
}
