import { isIdemError } from '@idem/contracts';
import { depositAddressOwners, openBreak, recordDeposit, type Tx } from '@idem/core';
import type { WorkerContext } from '../context.ts';

/** What a `deposit.confirmed` notification claims: the sender's word, signed with the source's secret. */
export interface NotifiedDeposit {
  reference: string;
  accountId: string;
  asset: string;
  amountMinor: string;
  txHash?: string | undefined;
}

export type DepositOutcome = { status: 'PROCESSED' | 'PARKED'; reason: string };

/** A term of the notification that must equal the custodian's own record before anything is credited. */
type DepositTerm = 'account' | 'asset' | 'amount';

/**
 * Credits a notified deposit from the custodian's own record of it, never from the notification.
 * Whoever holds an inbound source's secret (the admin who created or rotated it, anyone it leaked
 * to) can sign any body; what the custodian's API answers is the authority. The credit goes to
 * the account the deposit address is registered to in this tenant, for the asset and amount the
 * custodian reports, under the same key as the poller's copy of the same deposit.
 *
 * - The custodian has no such deposit: parked, and an unknown-operation break names it.
 * - The address is not one of this tenant's: parked, nothing said about whose it is.
 * - The notification differs from the record (account, asset, amount): parked with a variance break.
 * - The custodian cannot be asked: the error propagates and the work item is retried later.
 */
export async function creditCustodianDeposit(
  ctx: WorkerContext,
  tx: Tx,
  tenantId: string,
  source: string,
  notified: NotifiedDeposit,
): Promise<DepositOutcome> {
  const custodian = ctx.rails.config.custodian;
  if (!custodian) return { status: 'PARKED', reason: 'no custodian is configured to confirm the deposit' };
  const subject = `custodian-deposit:${notified.reference}`;
  const record = await custodian.depositById(notified.reference);
  if (!record) {
    await openBreak(tx, {
      tenantId,
      breakClass: 'unknown_operation',
      subject,
      assetCode: notified.asset,
      observedAmountMinor: notified.amountMinor,
      details: { source, reason: 'a deposit notification names a deposit the custodian does not hold' },
    });
    alert(ctx, tenantId, subject, 'a deposit notification names a deposit the custodian does not hold');
    return { status: 'PARKED', reason: 'the custodian has no such deposit' };
  }
  const owners = await depositAddressOwners(tx, tenantId, record.network, [record.address]);
  const accountId = owners.get(record.address);
  if (!accountId) return { status: 'PARKED', reason: 'the deposit address is not registered to this tenant' };

  const differs: DepositTerm[] = [];
  if (notified.accountId !== accountId) differs.push('account');
  if (notified.asset !== record.asset) differs.push('asset');
  if (notified.amountMinor !== record.amountMinor) differs.push('amount');
  if (differs.length > 0) {
    const reason = `deposit notification differs from the custodian's record: ${differs.join(', ')}`;
    await openBreak(tx, {
      tenantId,
      breakClass: 'genuine_variance',
      subject,
      assetCode: record.asset,
      ledgerAmountMinor: record.amountMinor,
      observedAmountMinor: notified.amountMinor,
      details: { source, reason, differs },
    });
    alert(ctx, tenantId, subject, reason);
    return { status: 'PARKED', reason };
  }

  try {
    const claim = await tx.transaction((savepoint) =>
      recordDeposit(savepoint, {
        tenantId,
        deposit: {
          reference: record.id,
          accountId,
          asset: record.asset,
          amountMinor: record.amountMinor,
        },
        idempotencyKey: `deposit-${source}-${record.id}`,
        actor: `webhook:${source}`,
        evidence: { source, confirmedBy: 'custodian-api', txHash: record.txHash ?? null },
      }),
    );
    return {
      status: 'PROCESSED',
      reason: claim.outcome === 'CREATED' ? 'deposit credited' : 'deposit already credited',
    };
  } catch (error) {
    if (isIdemError(error)) return { status: 'PARKED', reason: `deposit refused: ${error.code}` };
    throw error;
  }
}

function alert(ctx: WorkerContext, tenantId: string, subject: string, reason: string): void {
  ctx.log.warn({ alert: true, tenantId, subject }, `reconciliation break opened: ${reason}`);
}
