import { z } from 'zod';
import { amountMinorSchema } from './amount.ts';
import { assetCodeSchema } from './asset-code.ts';
import { referenceSchema } from './key.ts';
import { cursorSchema } from './paging.ts';

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
  asset: assetCodeSchema,
  amountMinor: amountMinorSchema,
  /** Where the custodian sends (or sent) the money: it must be the approved destination. */
  destination: z.string().min(1).max(128),
  memo: z.string().max(256).optional(),
  status: z.enum(['submitted', 'completed', 'failed']),
  txHash: z.string().max(128).optional(),
  failureReason: z.string().max(500).optional(),
});

export const inboundEventDataSchemas = {
  /** A custodian or chain watcher saw a deposit reach the asset's confirmation depth. */
  'deposit.confirmed': z.strictObject({
    reference: referenceSchema,
    accountId: referenceSchema,
    asset: assetCodeSchema,
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

/**
 * What Idem sends to the operator's endpoints on every state change of an operation (Standard
 * Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature` headers). The SDK verifies with
 * it and the OpenAPI document publishes it. Never the destination or memo (C23).
 */
export const operationWebhookSchema = z.object({
  type: z.literal('operation.state_changed'),
  timestamp: z.string(),
  // Not strict: a receiver built on this version keeps working when a field is added.
  data: z.object({
    operationId: z.string(),
    kind: z.string().nullable(),
    reference: z.string().nullable(),
    accountId: z.string().nullable(),
    asset: z.string().nullable(),
    amountMinor: z.string().nullable(),
    from: z.string().nullable(),
    to: z.string(),
    version: z.number(),
    owner: z.string().nullable(),
    /** Where the money went, as in the withdrawal view: the transaction we signed ... */
    txHash: z.string().nullable(),
    /** ... or the custodian's transfer id and the hash it reports. */
    custodianTransferId: z.string().nullable(),
    custodianTxHash: z.string().nullable(),
  }),
});
export type OperationWebhook = z.infer<typeof operationWebhookSchema>;

export const deliveryStatuses = ['pending', 'done', 'dead'] as const;
export type DeliveryStatus = (typeof deliveryStatuses)[number];

/**
 * What staff read of every failed attempt, whatever went wrong: a receiver's status, a timeout, a
 * refused connection and an address the egress policy refused all look alike, so the delivery log
 * cannot be used to fingerprint services inside the network. The reason is in the worker's log.
 */
export const DELIVERY_FAILED = 'delivery failed';

/** One line of the outbound delivery log: one notification to one endpoint. */
export const webhookDeliverySchema = z.object({
  workId: z.uuid(),
  endpointId: z.uuid(),
  operationId: z.uuid().nullable(),
  event: operationWebhookSchema.shape.data,
  status: z.enum(deliveryStatuses),
  attempts: z.number().int(),
  /** The receiver's 2xx status when the last attempt succeeded; null otherwise. */
  lastResponseStatus: z.number().int().nullable(),
  /** DELIVERY_FAILED when the last attempt failed; null otherwise. */
  lastError: z.string().nullable(),
  lastAttemptAt: z.string().nullable(),
  nextAttemptAt: z.string().nullable(),
  deliveredAt: z.string().nullable(),
  manualRedeliveries: z.number().int(),
  createdAt: z.string(),
});
export type WebhookDelivery = z.infer<typeof webhookDeliverySchema>;

export const deliveryListInputSchema = z.strictObject({
  status: z.enum(deliveryStatuses).optional(),
  endpointId: z.uuid().optional(),
  operationId: z.uuid().optional(),
  cursor: cursorSchema.optional(),
  limit: z.number().int().min(1).max(200).default(50),
});
export type DeliveryListInput = z.input<typeof deliveryListInputSchema>;

export const redeliverInputSchema = z.strictObject({ workId: z.uuid(), endpointId: z.uuid() });
