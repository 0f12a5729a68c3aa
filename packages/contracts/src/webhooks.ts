import { z } from 'zod';
import { amountMinorSchema } from './amount.ts';
import { referenceSchema } from './key.ts';

/**
 * Inbound webhooks follow the Standard Webhooks envelope: the event id travels in the
 * `webhook-id` header, the body is `{ type, timestamp, data }`. The types below are the ones the
 * inbox acts on; any other type is stored UNHANDLED and never guessed at (C19).
 */
export const inboundEnvelopeSchema = z.object({
  type: z.string().min(1).max(100),
  timestamp: z.string().max(64).optional(),
  data: z.unknown(),
});

/** The transfer object a custodian sends; extra provider fields are allowed and ignored. */
const custodianTransferSchema = z.object({
  id: z.string().min(1).max(128),
  externalReference: z.string().min(1).max(128),
  asset: z.string().regex(/^[A-Z0-9]{2,12}$/),
  amountMinor: amountMinorSchema,
  status: z.enum(['submitted', 'completed', 'failed']),
  txHash: z.string().max(128).optional(),
  failureReason: z.string().max(500).optional(),
});

export const inboundEventDataSchemas = {
  /** A custodian or chain watcher saw a deposit reach the asset's confirmation depth. */
  'deposit.confirmed': z.strictObject({
    reference: referenceSchema,
    accountId: referenceSchema,
    asset: z.string().regex(/^[A-Z0-9]{2,12}$/),
    amountMinor: amountMinorSchema,
    txHash: z.string().max(128).optional(),
  }),
  /**
   * The custodian's status webhooks for a transfer we asked it to make (the rail's wire format,
   * packages/rails/src/custodian/protocol.ts). Only our reference ties it to an operation (C16).
   */
  'transfer.submitted': custodianTransferSchema,
  'transfer.completed': custodianTransferSchema,
  'transfer.failed': custodianTransferSchema,
} as const;

export type InboundEventType = keyof typeof inboundEventDataSchemas;

/**
 * The source a custodian's webhook endpoint is registered with. The custodian poller records what
 * it finds under the same source, so its events and the webhooks share the inbox's deduplication
 * and deposit keys (`deposit-custodian-<reference>`): whichever comes second is a replay.
 */
export const CUSTODIAN_SOURCE = 'custodian';

export function isKnownInboundType(type: string): type is InboundEventType {
  return Object.hasOwn(inboundEventDataSchemas, type);
}

/** What the intake answers for each class of input, also the label of the webhook metric. */
export const inboxOutcomes = [
  'ACCEPTED',
  'DUPLICATE',
  'UNHANDLED',
  'QUARANTINED',
  'REJECTED_SIGNATURE',
  'UNKNOWN_ENDPOINT',
  'UNAVAILABLE',
] as const;
export type InboxOutcome = (typeof inboxOutcomes)[number];
