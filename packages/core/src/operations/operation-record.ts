import type { OperationKind, OperationState, OperationView } from '@idem/contracts';
import { IdemError } from '@idem/contracts';
import { type ApprovedPayload, payloadHash } from '@idem/contracts/payload';
import { and, eq } from 'drizzle-orm';
import type { Executor } from '../db/connect.ts';
import { operations } from '../db/schema/index.ts';

export type Operation = typeof operations.$inferSelect & { kind: OperationKind; state: OperationState };

export async function findOperation(
  db: Executor,
  tenantId: string,
  operationId: string,
): Promise<Operation | null> {
  const rows = await db
    .select()
    .from(operations)
    .where(and(eq(operations.tenantId, tenantId), eq(operations.operationId, operationId)));
  return (rows[0] as Operation | undefined) ?? null;
}

export async function getOperation(db: Executor, tenantId: string, operationId: string): Promise<Operation> {
  const found = await findOperation(db, tenantId, operationId);
  if (!found) throw new IdemError('NOT_FOUND', 'operation not found');
  return found;
}

export async function findByKey(db: Executor, tenantId: string, key: string): Promise<Operation | null> {
  const rows = await db
    .select()
    .from(operations)
    .where(and(eq(operations.tenantId, tenantId), eq(operations.idempotencyKey, key)));
  return (rows[0] as Operation | undefined) ?? null;
}

export async function findByReference(
  db: Executor,
  tenantId: string,
  kind: OperationKind,
  reference: string,
): Promise<Operation | null> {
  const rows = await db
    .select()
    .from(operations)
    .where(
      and(eq(operations.tenantId, tenantId), eq(operations.kind, kind), eq(operations.reference, reference)),
    );
  return (rows[0] as Operation | undefined) ?? null;
}

/** The approved payload as the operation's stored columns hold it now. */
export function approvedPayloadOf(op: Operation): ApprovedPayload {
  return {
    tenantId: op.tenantId,
    kind: op.kind,
    reference: op.reference,
    accountRef: op.accountRef,
    assetCode: op.assetCode,
    network: op.network,
    destination: op.destination,
    memo: op.memo,
    amountMinor: op.amountMinor,
    feeCapMinor: op.feeCapMinor,
    policyVersion: op.policyVersion,
  };
}

/** The hash recomputed from the operation's stored columns (what a signer checks, C02). */
export function recomputeHash(op: Operation): string {
  return payloadHash(approvedPayloadOf(op));
}

/** What the signer is handed with a transaction: the stored fields and the approved hash (C02). */
export function approvalOf(op: Operation): {
  payload: ApprovedPayload;
  payloadHash: string;
  operationId: string;
} {
  return { payload: approvedPayloadOf(op), payloadHash: op.payloadHash, operationId: op.operationId };
}

/** Refuses an operation whose stored fields no longer hash to the approved hash. */
export function assertPayloadIntact(op: Operation): void {
  if (recomputeHash(op) !== op.payloadHash) {
    throw new IdemError('PAYLOAD_MISMATCH', 'the stored payload does not match its approved hash; refusing');
  }
}

export function toView(op: Operation): OperationView {
  return {
    operationId: op.operationId,
    kind: op.kind,
    reference: op.reference,
    accountId: op.accountRef,
    asset: op.assetCode,
    network: op.network,
    destination: op.destination,
    memo: op.memo,
    amountMinor: op.amountMinor,
    feeCapMinor: op.feeCapMinor,
    state: op.state,
    rejectionCode: op.rejectionCode,
    txHash: op.txHash,
    custodianTransferId: op.providerRef,
    custodianTxHash: op.providerTxHash,
    waitingReason: op.state === 'APPROVED' ? op.waitingReason : null,
    createdAt: op.createdAt.toISOString(),
    updatedAt: op.updatedAt.toISOString(),
  };
}
