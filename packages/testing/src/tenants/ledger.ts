import { randomBytes } from 'node:crypto';
import { IdemError, type WithdrawalRequest } from '@idem/contracts';
import {
  createStaffUser,
  createTenant,
  createWithdrawal,
  creditAsOperator,
  type Database,
  decideWithdrawal,
  getBalances,
  leaseForSigning,
  type Operation,
  recordSigned,
  reviewWithdrawal,
  staffActor,
  type Tx,
  transition,
  withTenant,
} from '@idem/core';
import { getAddress } from 'viem';

import { ETH } from '../chain/units.ts';

export { ETH };

export function evmAddress(): string {
  return getAddress(`0x${randomBytes(20).toString('hex')}`);
}

export async function newTenant(db: Database, name = 'Test Exchange'): Promise<string> {
  const { tenantId } = await createTenant(db, { name, mfaRequired: false });
  return tenantId;
}

/** Credits an account through the real deposit path. */
export async function fund(
  db: Database,
  tenantId: string,
  accountId: string,
  asset: string,
  amountMinor: bigint,
) {
  const reference = `dep-${randomBytes(6).toString('hex')}`;
  await creditAsOperator(db, {
    tenantId,
    deposit: { reference, accountId, asset, amountMinor: amountMinor.toString() },
    idempotencyKey: `deposit-${reference}`,
    actor: 'test',
  });
}

export function withdrawal(overrides: Partial<WithdrawalRequest> = {}): WithdrawalRequest {
  return {
    withdrawalId: `wd-${randomBytes(6).toString('hex')}`,
    accountId: 'acct-1',
    asset: 'ETH',
    destination: evmAddress(),
    amountMinor: (ETH / 10n).toString(),
    ...overrides,
  };
}

export function submit(db: Database, tenantId: string, request: unknown, idempotencyKey: unknown) {
  return withTenant(db, tenantId, (tx) => createWithdrawal(tx, { tenantId, request, idempotencyKey }));
}

export async function balanceOf(db: Database, tenantId: string, accountId: string, asset = 'ETH') {
  const rows = await withTenant(db, tenantId, (tx) => getBalances(tx, tenantId, accountId));
  const row = rows.find((b) => b.asset === asset);
  return { available: BigInt(row?.available ?? 0), held: BigInt(row?.held ?? 0) };
}

/** Awaits a promise that must fail with an IdemError, and returns it. */
export async function refusal(promise: Promise<unknown>): Promise<IdemError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof IdemError) return error;
    throw error;
  }
  throw new Error('expected a refusal, but the call succeeded');
}

/** Awaits a statement the database must refuse, and returns the database's own message. */
export async function databaseRefusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    const cause = (error as { cause?: { message?: string } }).cause;
    return cause?.message ?? (error as Error).message;
  }
  throw new Error('expected the database to refuse, but the statement succeeded');
}

/**
 * Approves a REQUESTED withdrawal the way the database accepts, in the caller's
 * transaction: the risk review first (which alone approves it within the tenant's auto-approve
 * rules), then as many decisions bound to its payload hash as the review asks, each by a new active
 * approver of the tenant. A test that needs an APPROVED withdrawal gets one only this way.
 */
export async function approveWithdrawal(tx: Tx, requested: Operation): Promise<Operation> {
  let op = await reviewWithdrawal(tx, requested);
  for (let i = 0; op.state === 'REQUESTED' && i < (op.approvalsRequired ?? 1); i += 1) {
    const approver = await createStaffUser(tx, {
      tenantId: op.tenantId,
      email: `approver-${randomBytes(4).toString('hex')}@example.test`,
      role: 'approver',
      passwordHash: 'fixture-member-without-password',
    });
    const decided = await decideWithdrawal(tx, {
      tenantId: op.tenantId,
      operationId: op.operationId,
      staffId: staffActor(approver.userId),
      payloadHash: op.payloadHash,
      decision: 'approve',
    });
    op = decided.operation;
  }
  if (op.state !== 'APPROVED') throw new Error(`withdrawal ${op.operationId} is ${op.state}, not APPROVED`);
  return op;
}

/**
 * Walks a REQUESTED withdrawal to UNKNOWN (signed, then the send timed out), BROADCAST (sent, not
 * mined) or FAILED_TERMINAL
 * (broadcast, then reverted, owned by `owner`) the way a worker would, in the caller's transaction.
 */
export async function strandWithdrawal(
  tx: Tx,
  requested: Operation,
  to: 'UNKNOWN' | 'FAILED_TERMINAL' | 'BROADCAST',
  options: { txHash?: string | null; owner?: string; signedArtifact?: string } = {},
): Promise<Operation> {
  const approved = await approveWithdrawal(tx, requested);
  const leased = await leaseForSigning(tx, { operation: approved, workerId: 'w', leaseMs: 30_000 });
  if (!leased) throw new Error('lease lost');
  const signed = await recordSigned(tx, {
    tenantId: approved.tenantId,
    operationId: approved.operationId,
    leaseGeneration: leased.leaseGeneration,
    signedArtifact: options.signedArtifact ?? '0xbytes',
    txHash: options.txHash === undefined ? '0xfeed' : options.txHash,
    workerId: 'w',
  });
  // As the send step does: the lease ends with the attempt.
  if (to === 'UNKNOWN') {
    return transition(tx, signed, 'UNKNOWN', { actor: 'w', reason: 'timeout', set: { clearLease: true } });
  }
  const broadcast = await transition(tx, signed, 'BROADCAST', { actor: 'w', reason: 'sent' });
  if (to === 'BROADCAST') return broadcast;
  return transition(tx, broadcast, 'FAILED_TERMINAL', {
    actor: 'w',
    reason: 'reverted',
    set: { owner: options.owner ?? 'ops-oncall' },
  });
}
