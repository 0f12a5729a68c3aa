import type { OperationView } from '@idem/contracts';
import { IdemError } from '@idem/contracts';
import { eq } from 'drizzle-orm';
import { type OnBehalfOf, recordStaffInitiation } from '../approvals/requester.ts';
import { explorerUrlFor } from '../branding/explorers.ts';
import type { Tx } from '../db/connect.ts';
import { operations } from '../db/schema/index.ts';
import type { IdentityClaim } from '../operations/claim-identity.ts';
import { createWithdrawal } from '../operations/create-withdrawal.ts';
import { findOperation, toView } from '../operations/operation-record.ts';
import { pageOperations } from '../queries/list.ts';
import { reviewWithdrawal } from '../risk/review.ts';
import { operationTimeline } from '../staff/queries.ts';
import { refuseUnconfirmedDuplicate } from './duplicates.ts';

/**
 * The withdrawal id and idempotency key of one browser intent. Both derive from the intent id, so
 * a double-click, a reload mid-submit or a retry after a network error reaches the same operation
 * (C03); the account is part of both, so two accounts never share an identity.
 */
export function intentIdentity(accountRef: string, intentId: string): { withdrawalId: string; key: string } {
  const compact = intentId.replaceAll('-', '').toLowerCase();
  return { withdrawalId: `web-${compact}`, key: `web-${accountRef}-${compact}` };
}

/**
 * Creates a withdrawal from a web screen (customer or staff), through the same creation path as
 * the API (C24), recording the person as the requester, then reviews it at once in the same
 * transaction, so the screen can say whether it awaits approval. A replay leaves it as it is.
 * A staff requester (`staff:` actor) states whether they act at the account holder's request;
 * that is recorded in the history before the review, which never approves it alone (I11-F3).
 */
export async function submitWebWithdrawal(
  tx: Tx,
  input: {
    tenantId: string;
    accountRef: string;
    intentId: string;
    actor: string;
    asset: string;
    destination: string;
    memo?: string | undefined;
    amountMinor: string;
    /** Staff only: the account holder's request acted on; absent, the staff member acts on their own. */
    onBehalfOf?: OnBehalfOf | undefined;
    /**
     * Customer screens only: refuse a repeat of an in-progress withdrawal unless it names the one the
     * person confirmed they want another of (I14-DEVICE). Absent (staff), no such check.
     */
    duplicateCheck?: { confirmDuplicateOf?: string | undefined } | undefined;
  },
): Promise<IdentityClaim> {
  const { withdrawalId, key } = intentIdentity(input.accountRef, input.intentId);
  if (input.duplicateCheck) {
    await refuseUnconfirmedDuplicate(tx, {
      tenantId: input.tenantId,
      accountRef: input.accountRef,
      withdrawalId,
      asset: input.asset,
      destination: input.destination,
      amountMinor: input.amountMinor,
      confirmDuplicateOf: input.duplicateCheck.confirmDuplicateOf,
    });
  }
  const claim = await createWithdrawal(tx, {
    tenantId: input.tenantId,
    idempotencyKey: key,
    actor: input.actor,
    request: {
      withdrawalId,
      accountId: input.accountRef,
      asset: input.asset,
      destination: input.destination,
      amountMinor: input.amountMinor,
      ...(input.memo ? { memo: input.memo } : {}),
    },
  });
  if (claim.outcome !== 'CREATED' || claim.operation.state !== 'REQUESTED') return claim;
  const created = input.actor.startsWith('staff:')
    ? await recordStaffInitiation(tx, claim.operation, {
        actor: input.actor,
        onBehalfOf: input.onBehalfOf ?? null,
      })
    : claim.operation;
  return { ...claim, operation: await reviewWithdrawal(tx, created) };
}

/** One account's withdrawals, newest first. */
export async function listAccountWithdrawals(
  tx: Tx,
  tenantId: string,
  accountRef: string,
  options: { cursor?: string | undefined; limit: number },
): Promise<{ items: OperationView[]; nextCursor: string | null }> {
  const page = await pageOperations(
    tx,
    [
      eq(operations.tenantId, tenantId),
      eq(operations.accountRef, accountRef),
      eq(operations.kind, 'withdrawal'),
    ],
    options,
  );
  return { items: page.items.map(toView), nextCursor: page.nextCursor };
}

/**
 * One of the account's own withdrawals with its timeline. Another account's withdrawal, or
 * another tenant's, is NOT_FOUND like a missing one.
 */
export async function getAccountWithdrawal(
  tx: Tx,
  tenantId: string,
  accountRef: string,
  operationId: string,
) {
  const op = await findOperation(tx, tenantId, operationId);
  if (!op || op.accountRef !== accountRef || op.kind !== 'withdrawal') {
    throw new IdemError('NOT_FOUND', 'no such withdrawal');
  }
  const timeline = await operationTimeline(tx, tenantId, operationId);
  return {
    withdrawal: toView(op),
    explorerUrl: await explorerUrlFor(tx, tenantId, op.network, op.txHash),
    timeline: timeline.map(({ seq, fromState, toState, createdAt }) => ({
      seq,
      fromState,
      toState,
      createdAt,
    })),
  };
}
