/**
 * The wire format of the custody REST API that the simulator serves and the adapter speaks: a
 * typical provider shape (create a transfer with the caller's reference, look it up, receive
 * signed status webhooks). Both sides parse with these schemas, so a drift fails loudly.
 */
import { amountMinorSchema, assetCodeSchema, referenceSchema } from '@idem/contracts';
import { z } from 'zod';

/** Our reference: the operation id we send. Opaque to the provider; at most 128 printable characters. */
export const externalReferenceSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[\x21-\x7e]+$/, { error: 'externalReference must be printable ASCII without spaces' });

export const createTransferBodySchema = z.strictObject({
  externalReference: externalReferenceSchema,
  asset: assetCodeSchema,
  amountMinor: amountMinorSchema,
  destination: z.string().min(1).max(128),
  memo: z.string().max(256).optional(),
});
export type CreateTransferBody = z.infer<typeof createTransferBodySchema>;

export const transferStatusSchema = z.enum(['submitted', 'completed', 'failed']);
export type TransferStatus = z.infer<typeof transferStatusSchema>;

export const custodianTransferSchema = z.object({
  /** The provider's durable id. */
  id: z.string().min(1).max(128),
  externalReference: externalReferenceSchema,
  asset: z.string(),
  amountMinor: amountMinorSchema,
  destination: z.string(),
  memo: z.string().optional(),
  status: transferStatusSchema,
  failureReason: z.string().optional(),
  /** Set when the provider broadcast on chain; absent before. */
  txHash: z.string().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type CustodianTransfer = z.infer<typeof custodianTransferSchema>;

/**
 * A page of transfers. Listing the whole account is cursor-paged: `nextCursor` is null on the last
 * page; a lookup by reference answers one page without it.
 */
export const transferListSchema = z.object({
  data: z.array(custodianTransferSchema).max(100),
  nextCursor: z.string().min(1).max(256).nullable().optional(),
});

/** Test route POST /_seed: transfers put on the simulator's books as given (no webhooks, no settlement). */
export const seedBodySchema = z.strictObject({
  transfers: z.array(custodianTransferSchema).min(1).max(5_000),
});
export type SeedBody = z.infer<typeof seedBodySchema>;

/**
 * What the account holds per asset (GET /v1/balances), with the time the provider reports it as
 * of: the custodian side of balance-level reconciliation. Signed, because a provider that lets an
 * account go short must be seen to, not refused by our parser.
 */
export const accountBalancesSchema = z.object({
  asOf: z.string().refine((value) => !Number.isNaN(Date.parse(value)), { error: 'asOf must be a date' }),
  data: z
    .array(
      z.object({
        asset: assetCodeSchema,
        amountMinor: z.string().regex(/^(0|-?[1-9][0-9]{0,77})$/),
      }),
    )
    .max(1_000),
});
export type AccountBalances = z.infer<typeof accountBalancesSchema>;

/**
 * A deposit the custodian received and considers final: into one of its addresses, which the
 * provider tags with the customer account it was opened for. Never changes once reported.
 */
export const custodianDepositSchema = z.object({
  /** The provider's durable id: our deposit reference. */
  id: referenceSchema,
  network: z.string().min(1).max(32),
  address: z.string().min(1).max(128),
  accountId: z.string().min(1).max(128),
  asset: assetCodeSchema,
  amountMinor: amountMinorSchema,
  txHash: z.string().max(128).optional(),
  status: z.literal('confirmed'),
  confirmedAt: z.iso.datetime(),
});
export type CustodianDeposit = z.infer<typeof custodianDepositSchema>;

export const depositListSchema = z.object({ data: z.array(custodianDepositSchema).max(100) });

/**
 * A time window for `GET /v1/deposits` (by `confirmedAt`) and `GET /v1/transfers` (by `updatedAt`):
 * `from` inclusive, `to` exclusive, answered oldest first (then by id) a page at a time.
 */
export interface TimeWindow {
  from: Date;
  to: Date;
}

export const webhookEventTypes = ['transfer.submitted', 'transfer.completed', 'transfer.failed'] as const;
export type WebhookEventType = (typeof webhookEventTypes)[number];

/** The envelope every webhook has. `type` stays an open string: unknown types are stored, not refused (C19). */
export const webhookEnvelopeSchema = z.object({
  type: z.string().min(1).max(128),
  occurredAt: z.string(),
  data: z.unknown(),
});

/** The misbehaviours a single POST /v1/transfers can be given (header `x-simulator-fault`). */
export const submitFaultSchema = z.enum([
  'none',
  /** Record the transfer, then never answer: the caller times out. */
  'accept-then-timeout',
  /** Record the transfer, then answer 503. */
  'accept-then-5xx',
  /** Record the transfer, then reset the connection. */
  'accept-then-reset',
  /** Refuse with 422 and a reason; no transfer is recorded. */
  'reject',
  /** Record the transfer, answer 200 with a body that carries neither our reference nor an id (C16). */
  'ok-without-reference',
  /** Record the transfer, answer 200 with only the provider's id. */
  'ok-id-only',
]);
export type SubmitFault = z.infer<typeof submitFaultSchema>;

export const webhookDeliverySchema = z.enum([
  'normal',
  /** Each event is delivered twice with the same webhook id and body. */
  'duplicate',
  /** Each event is delivered after `lateMs`. */
  'late',
  /** A transfer's events are delivered newest first. */
  'out-of-order',
  /** Each event is delivered, then delivered again under the same webhook id with a different body. */
  'conflicting-body',
]);
export type WebhookDelivery = z.infer<typeof webhookDeliverySchema>;

export const controlBodySchema = z.strictObject({
  /** The fault for the next `faultTimes` POST /v1/transfers (all of them when omitted). */
  fault: submitFaultSchema.optional(),
  faultTimes: z.number().int().min(1).max(1_000).optional(),
  /**
   * `reference`: a second POST with a known reference returns the first transfer (typical provider).
   * `none`: every POST creates a transfer, like a provider without documented idempotency.
   */
  idempotency: z.enum(['reference', 'none']).optional(),
  webhooks: z
    .strictObject({
      url: z.url().nullable().optional(),
      delivery: webhookDeliverySchema.optional(),
      lateMs: z.number().int().min(0).max(60_000).optional(),
      /** Event types never delivered (a lost or never-sent webhook); `[]` delivers all again. */
      drop: z.array(z.string().min(1).max(128)).max(10).optional(),
    })
    .optional(),
  /** What happens to a submitted transfer and when: complete, fail, or stay submitted (`hold`). */
  settlement: z
    .strictObject({
      outcome: z.enum(['complete', 'fail', 'hold']),
      afterMs: z.number().int().min(0).max(60_000),
    })
    .optional(),
  /** Settles the transfers held (`hold`) under this reference now, as their settlement would have. */
  settleHeld: z
    .strictObject({ externalReference: externalReferenceSchema, outcome: z.enum(['complete', 'fail']) })
    .optional(),
  /** Adds to the account's holdings of an asset (money arriving at the custodian: a deposit, a top-up). */
  fund: z.strictObject({ asset: assetCodeSchema, amountMinor: amountMinorSchema }).optional(),
  /**
   * Misreport the balance of an asset by this signed amount from now on (GET /v1/balances only;
   * the holdings themselves are untouched). Null clears every misreport.
   */
  misreportBalance: z
    .strictObject({
      asset: assetCodeSchema,
      deltaMinor: z.string().regex(/^-?[0-9]{1,78}$/),
    })
    .nullable()
    .optional(),
  /** A customer's deposit arrives at one of the custodian's addresses (emits `deposit.confirmed`). */
  deposit: z
    .strictObject({
      network: z.string().min(1).max(32),
      address: z.string().min(1).max(128),
      accountId: z.string().min(1).max(128),
      asset: assetCodeSchema,
      amountMinor: amountMinorSchema,
      /** Backdates the deposit (a provider that indexes late); default now. */
      confirmedAt: z.iso.datetime().optional(),
    })
    .optional(),
  /** Clears the ledger, holdings, pending webhooks and faults. */
  reset: z.literal(true).optional(),
});
export type ControlBody = z.infer<typeof controlBodySchema>;

export const ledgerSchema = z.object({
  transfers: z.array(custodianTransferSchema),
  deposits: z.array(custodianDepositSchema),
  countsByReference: z.record(z.string(), z.number()),
  webhookDeliveries: z.array(
    z.object({ webhookId: z.string(), type: z.string(), status: z.number().nullable(), body: z.string() }),
  ),
});
export type Ledger = z.infer<typeof ledgerSchema>;
