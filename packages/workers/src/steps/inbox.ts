import { inboundEventDataSchemas } from '@idem/contracts';
import { findOperation, type Operation, openBreak, schema, type Tx, transition } from '@idem/core';
import type { CustodianTransfer } from '@idem/rails';
import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import type { WorkerContext } from '../context.ts';
import { custodianTermsDiffer } from '../custodian-terms.ts';
import { routeFor } from '../rails.ts';
import { processWorkItems } from '../work-items.ts';
import { creditCustodianDeposit } from './custodian-deposit.ts';
import { custodianSettlement } from './evidence.ts';

const { inboxEvents } = schema;

const itemPayloadSchema = z.object({ source: z.string(), eventId: z.string(), eventType: z.string() });

type Outcome = { status: 'PROCESSED' | 'PARKED'; reason: string };

/**
 * Applies verified inbound events (C18, C19): each one at most once, and only where the state
 * machine allows. An event that would need a transition the machine does not allow from the
 * operation's current state (out of order, late, or contradicting what we know) is parked, never
 * forced: the reconciler's own query to the custodian settles the truth.
 */
export async function processInbox(ctx: WorkerContext, tenantId: string): Promise<number> {
  return processWorkItems(ctx, tenantId, 'inbox.event', async (tx, item) => {
    const payload = itemPayloadSchema.parse(item.payload);
    const outcome = await applyEvent(ctx, tx, tenantId, payload);
    ctx.log.info(
      { tenantId, eventId: payload.eventId, eventType: payload.eventType, ...outcome },
      'inbound event handled',
    );
  });
}

async function applyEvent(
  ctx: WorkerContext,
  tx: Tx,
  tenantId: string,
  item: z.infer<typeof itemPayloadSchema>,
): Promise<Outcome> {
  const rows = await tx
    .select()
    .from(inboxEvents)
    .where(
      and(
        eq(inboxEvents.tenantId, tenantId),
        eq(inboxEvents.source, item.source),
        eq(inboxEvents.eventId, item.eventId),
      ),
    )
    .for('update');
  const event = rows[0];
  if (!event) return { status: 'PARKED', reason: 'event not found' };
  if (event.status !== 'RECEIVED')
    return { status: event.status === 'PARKED' ? 'PARKED' : 'PROCESSED', reason: 'already handled' };

  const outcome = await decide(
    ctx,
    tx,
    tenantId,
    item.source,
    event.eventType,
    (event.body as { data?: unknown }).data,
  );
  await tx
    .update(inboxEvents)
    .set({ status: outcome.status })
    .where(
      and(
        eq(inboxEvents.tenantId, tenantId),
        eq(inboxEvents.source, item.source),
        eq(inboxEvents.eventId, item.eventId),
        eq(inboxEvents.status, 'RECEIVED'),
      ),
    );
  return outcome;
}

async function decide(
  ctx: WorkerContext,
  tx: Tx,
  tenantId: string,
  source: string,
  eventType: string,
  data: unknown,
): Promise<Outcome> {
  if (eventType === 'deposit.confirmed') {
    const deposit = inboundEventDataSchemas['deposit.confirmed'].parse(data);
    return creditCustodianDeposit(ctx, tx, tenantId, source, deposit);
  }
  if (
    eventType === 'transfer.submitted' ||
    eventType === 'transfer.completed' ||
    eventType === 'transfer.failed'
  ) {
    const transfer = inboundEventDataSchemas[eventType].parse(data);
    const op = z.uuid().safeParse(transfer.externalReference).success
      ? await findOperation(tx, tenantId, transfer.externalReference)
      : null;
    if (op?.kind !== 'withdrawal' || routeFor(op.network).kind !== 'custodian') {
      await openBreak(tx, {
        tenantId,
        breakClass: 'unknown_operation',
        subject: `custodian-transfer:${transfer.id}`,
        assetCode: transfer.asset,
        observedAmountMinor: transfer.amountMinor,
        details: { source, eventType, reason: 'custodian reports a transfer no withdrawal of ours matches' },
      });
      return { status: 'PARKED', reason: 'no matching withdrawal' };
    }
    // A report under another transfer id, or to another destination or memo, is not our withdrawal
    // settling: it stays as it is and a person looks at the variance.
    const differs = custodianTermsDiffer(op, transfer);
    if (differs.length > 0) {
      const reason = `custodian transfer terms differ from the approved payload: ${differs.join(', ')}`;
      const opened = await openBreak(tx, {
        tenantId,
        breakClass: 'genuine_variance',
        subject: `operation:${op.operationId}`,
        assetCode: op.assetCode,
        ledgerAmountMinor: op.amountMinor,
        observedAmountMinor: transfer.amountMinor,
        details: {
          source,
          eventType,
          reason,
          differs,
          providerId: transfer.id,
          expectedProviderId: op.providerRef,
        },
      });
      if (opened.opened) {
        ctx.log.warn(
          { alert: true, tenantId, operationId: op.operationId, breakId: opened.break.breakId, differs },
          'reconciliation break opened: a custodian report differs from the approved withdrawal',
        );
      }
      return { status: 'PARKED', reason };
    }
    return applyTransferStatus(ctx, tx, op, eventType, transfer);
  }
  return { status: 'PARKED', reason: `no handler for ${eventType}` };
}

/** The one edge an event may cause from each state; anything else is parked. */
const EDGES: Record<string, Partial<Record<Operation['state'], Operation['state']>>> = {
  'transfer.submitted': { UNKNOWN: 'BROADCAST' },
  'transfer.completed': { BROADCAST: 'CONFIRMED', UNKNOWN: 'CONFIRMED' },
  'transfer.failed': { BROADCAST: 'UNKNOWN', UNKNOWN: 'VERIFIED_NOT_SENT' },
};
/** States in which the event adds nothing new: handled, no change. */
const ALREADY: Record<string, Operation['state'][]> = {
  'transfer.submitted': ['BROADCAST', 'CONFIRMED'],
  'transfer.completed': ['CONFIRMED'],
  'transfer.failed': ['VERIFIED_NOT_SENT'],
};

async function applyTransferStatus(
  ctx: WorkerContext,
  tx: Tx,
  op: Operation,
  eventType: 'transfer.submitted' | 'transfer.completed' | 'transfer.failed',
  transfer: { id: string; txHash?: string | undefined },
): Promise<Outcome> {
  if (ALREADY[eventType]?.includes(op.state)) return { status: 'PROCESSED', reason: `already ${op.state}` };
  const to = EDGES[eventType]?.[op.state];
  if (!to) return { status: 'PARKED', reason: `${eventType} does not apply to a ${op.state} withdrawal` };
  const confirmed = await confirmByCustodian(ctx, op, eventType, transfer.id);
  if ('refused' in confirmed) return { status: 'PARKED', reason: confirmed.refused };
  const record = confirmed.transfer;
  const settlement = custodianSettlement(op, {
    rail: 'custodian',
    providerId: record.id,
    // The hash counts as where the money went only once the custodian says the transfer completed,
    // and it is the hash on the custodian's record, not the one the notification carried.
    txHash: eventType === 'transfer.completed' ? record.txHash : undefined,
  });
  await transition(tx, op, to, {
    actor: `webhook:custodian`,
    reason: `custodian reported ${eventType.replace('transfer.', '')}`,
    evidence: {
      providerId: record.id,
      eventType,
      txHash: record.txHash ?? null,
      confirmedBy: 'custodian-api',
    },
    ...(settlement ? { set: settlement } : {}),
  });
  ctx.log.info({ operationId: op.operationId, from: op.state, to }, 'custodian webhook applied');
  return { status: 'PROCESSED', reason: `${op.state} -> ${to}` };
}

/**
 * The custodian's own record of the transfer when it bears the notification out, else why not: asked
 * by our reference, it holds exactly one transfer, that transfer (same id) under the approved
 * terms, in the status the notification reports. Whoever holds the source's secret can sign any
 * status; a release (failed) or a settlement (completed) it invents would move money. A later
 * status than the notification's parks it too: the notification of that status, or the poller's
 * copy of it, moves the withdrawal. A custodian that cannot be asked throws: the item is retried.
 */
async function confirmByCustodian(
  ctx: WorkerContext,
  op: Operation,
  eventType: 'transfer.submitted' | 'transfer.completed' | 'transfer.failed',
  notifiedId: string,
): Promise<{ transfer: CustodianTransfer } | { refused: string }> {
  const custodian = ctx.rails.config.custodian;
  if (!custodian) return { refused: 'no custodian is configured to confirm the transfer status' };
  const found = await custodian.lookupByReference(op.operationId);
  if (found.found === 'none') return { refused: 'the custodian holds no transfer under our reference' };
  // Two transfers for one reference is the reconciler's escalation (C13, C14), never a settlement.
  if (found.found === 'many')
    return { refused: 'the custodian holds more than one transfer under our reference' };
  const record = found.transfer;
  if (record.id !== notifiedId)
    return { refused: 'the custodian holds another transfer under our reference' };
  const differs = custodianTermsDiffer(op, record);
  if (differs.length > 0)
    return { refused: `the custodian's transfer differs from the approved payload: ${differs.join(', ')}` };
  const reported = eventType.replace('transfer.', '');
  if (record.status !== reported)
    return { refused: `the custodian reports the transfer ${record.status}, not ${reported}` };
  return { transfer: record };
}
