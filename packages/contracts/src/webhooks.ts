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

export const inboundEventDataSchemas = {
  /** A custodian or chain watcher saw a deposit reach the asset's confirmation depth. */
  'deposit.confirmed': z.strictObject({
    reference: referenceSchema,
    accountId: referenceSchema,
    asset: z.string().regex(/^[A-Z0-9]{2,12}$/),
    amountMinor: amountMinorSchema,
    txHash: z.string().max(128).optional(),
  }),
  /** A custodian's status for a transfer we asked it to make, echoing our reference (C16). */
  'transfer.updated': z.strictObject({
    reference: referenceSchema,
    providerId: z.string().min(1).max(128),
    status: z.enum(['PENDING', 'BROADCAST', 'CONFIRMED', 'FAILED']),
    txHash: z.string().max(128).optional(),
  }),
} as const;

export type InboundEventType = keyof typeof inboundEventDataSchemas;

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
