import { isIdemError } from '@idem/contracts';
import type { Tx } from '../db/connect.ts';
import { openBreak } from '../reconciliation/breaks.ts';
import { transition } from '../state-machine/transition.ts';
import type { Operation } from './operation-record.ts';

/**
 * A reorganisation removed a credited deposit. The credit is taken back by a compensating entry
 * (CONFIRMED -> REVERSED); nothing is edited. A break is always raised so a person looks at it;
 * if the customer has already spent the funds, the reversal cannot post and the break is a
 * genuine variance for finance to resolve.
 */
export async function reverseDeposit(
  tx: Tx,
  input: { deposit: Operation; actor: string; evidence: Record<string, unknown> },
): Promise<{ reversed: boolean; operation: Operation }> {
  const { deposit } = input;
  try {
    const reversed = await tx.transaction((savepoint) =>
      transition(savepoint, deposit, 'REVERSED', {
        actor: input.actor,
        reason: 'deposit removed by a reorganisation',
        evidence: input.evidence,
      }),
    );
    await openBreak(tx, {
      tenantId: deposit.tenantId,
      breakClass: 'timing',
      subject: `operation:${deposit.operationId}`,
      assetCode: deposit.assetCode,
      ledgerAmountMinor: deposit.amountMinor,
      observedAmountMinor: '0',
      details: { reason: 'credited deposit reorganised out; reversal posted', ...input.evidence },
    });
    return { reversed: true, operation: reversed };
  } catch (error) {
    if (!isIdemError(error, 'INSUFFICIENT_FUNDS')) throw error;
    await openBreak(tx, {
      tenantId: deposit.tenantId,
      breakClass: 'genuine_variance',
      subject: `operation:${deposit.operationId}`,
      assetCode: deposit.assetCode,
      ledgerAmountMinor: deposit.amountMinor,
      observedAmountMinor: '0',
      details: {
        reason: 'credited deposit reorganised out and already spent; reversal could not post',
        ...input.evidence,
      },
    });
    return { reversed: false, operation: deposit };
  }
}
