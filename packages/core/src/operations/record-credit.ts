import {
  amountMinorSchema,
  assetCodeSchema,
  IdemError,
  idempotencyKeySchema,
  memoSchema,
  referenceSchema,
  signedAmountMinorSchema,
} from '@idem/contracts';
import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import type { Database, Tx } from '../db/connect.ts';
import { assets, tenants } from '../db/schema/index.ts';
import { withTenantAsConnection } from '../db/tenant-scope.ts';
import { postEntry, SYSTEM_ACCOUNTS } from '../journal/post-entry.ts';
import { recordTransition } from '../state-machine/transition.ts';
import { claimIdentity, type IdentityClaim } from './claim-identity.ts';
import { parseOrThrow, validation } from './input-validation.ts';

export const depositInputSchema = z.strictObject({
  /** The deposit's own reference: chain tx hash and log index, or the custodian's event id. */
  reference: referenceSchema,
  accountId: referenceSchema,
  asset: assetCodeSchema,
  amountMinor: amountMinorSchema,
});

export const adjustmentInputSchema = z.strictObject({
  reference: referenceSchema,
  accountId: referenceSchema,
  asset: assetCodeSchema,
  /** Signed: a negative adjustment debits available funds, and only if they are there. */
  amountMinor: signedAmountMinorSchema,
  /** Why, in words an auditor can read. Not personal data: it lands in the immutable core. */
  reason: memoSchema.min(3),
});

/**
 * A confirmed deposit credits the account, through the same identity path as a withdrawal (C24):
 * its own key, replay on a repeat, conflict on a changed payload or a second key for one reference.
 * Postings: custody control (what we now hold) against the customer's available balance.
 */
export async function recordDeposit(
  tx: Tx,
  input: {
    tenantId: string;
    deposit: unknown;
    idempotencyKey: unknown;
    actor: string;
    evidence?: Record<string, unknown>;
  },
): Promise<IdentityClaim> {
  const deposit = parseOrThrow(depositInputSchema, input.deposit);
  const idempotencyKey = parseOrThrow(idempotencyKeySchema, input.idempotencyKey);
  return recordCredit(tx, {
    tenantId: input.tenantId,
    kind: 'deposit',
    reference: deposit.reference,
    accountRef: deposit.accountId,
    assetCode: deposit.asset,
    amount: BigInt(deposit.amountMinor),
    memo: null,
    idempotencyKey,
    actor: input.actor,
    reason: 'deposit confirmed',
    evidence: input.evidence,
  });
}

/**
 * A deposit credited by the deployment's own tools, not by the application: the CLI's `idem deposit`
 * on a development database, the embedded demo's opening balances, test fixtures. It runs as the
 * connection's own role (`withTenantAsConnection`), since the database accepts a credit from a
 * control account without its evidence (a chain observation, the custodian's event, an executed
 * proposal) only from the tables' owner (idem_check_entry_source). The application's
 * login cannot do this.
 */
export async function creditAsOperator(
  db: Database,
  input: Parameters<typeof recordDeposit>[1],
): Promise<IdentityClaim> {
  return withTenantAsConnection(db, input.tenantId, (tx) => recordDeposit(tx, input));
}

/**
 * A manual adjustment (support or admin), through the same identity and journal path (C24).
 * A debit is a conditional UPDATE like a hold: it never overdraws (C08).
 */
export async function recordAdjustment(
  tx: Tx,
  input: {
    tenantId: string;
    adjustment: unknown;
    idempotencyKey: unknown;
    actor: string;
    evidence?: Record<string, unknown>;
  },
): Promise<IdentityClaim> {
  const adjustment = parseOrThrow(adjustmentInputSchema, input.adjustment);
  const idempotencyKey = parseOrThrow(idempotencyKeySchema, input.idempotencyKey);
  return recordCredit(tx, {
    tenantId: input.tenantId,
    kind: 'adjustment',
    reference: adjustment.reference,
    accountRef: adjustment.accountId,
    assetCode: adjustment.asset,
    amount: BigInt(adjustment.amountMinor),
    memo: adjustment.reason,
    idempotencyKey,
    actor: input.actor,
    reason: `manual adjustment: ${adjustment.reason}`,
    evidence: input.evidence,
  });
}

async function recordCredit(
  tx: Tx,
  input: {
    tenantId: string;
    kind: 'deposit' | 'adjustment';
    reference: string;
    accountRef: string;
    assetCode: string;
    amount: bigint;
    memo: string | null;
    idempotencyKey: string;
    actor: string;
    reason: string;
    evidence?: Record<string, unknown> | undefined;
  },
): Promise<IdentityClaim> {
  const context = await tx
    .select({ network: assets.network, policyVersion: tenants.policyVersion })
    .from(assets)
    .innerJoin(tenants, eq(tenants.tenantId, assets.tenantId))
    .where(and(eq(assets.tenantId, input.tenantId), eq(assets.code, input.assetCode)));
  const found = context[0];
  if (!found) throw validation('asset', `unknown asset ${input.assetCode}`);

  const claim = await claimIdentity(tx, {
    idempotencyKey: input.idempotencyKey,
    state: 'CONFIRMED',
    payload: {
      tenantId: input.tenantId,
      kind: input.kind,
      reference: input.reference,
      accountRef: input.accountRef,
      assetCode: input.assetCode,
      network: found.network,
      destination: null,
      memo: input.memo,
      amountMinor: input.amount.toString(),
      feeCapMinor: null,
      policyVersion: found.policyVersion,
    },
  });
  if (claim.outcome === 'REPLAYED') return claim;
  const counterpart = input.kind === 'deposit' ? SYSTEM_ACCOUNTS.custody : SYSTEM_ACCOUNTS.adjustments;
  const posted = await postEntry(tx, {
    tenantId: input.tenantId,
    operationId: claim.operation.operationId,
    kind: input.amount > 0n ? 'credit' : 'debit',
    postings: [
      { account: input.accountRef, bucket: 'available', assetCode: input.assetCode, amount: input.amount },
      { account: counterpart, bucket: 'control', assetCode: input.assetCode, amount: -input.amount },
    ],
  });
  if (!posted.ok) {
    // Thrown inside the caller's transaction: the operation row rolls back with it.
    throw new IdemError('INSUFFICIENT_FUNDS', 'the account lacks the available funds this debit needs');
  }
  await recordTransition(tx, claim.operation, null, {
    actor: input.actor,
    reason: input.reason,
    evidence: input.evidence,
  });
  return claim;
}
