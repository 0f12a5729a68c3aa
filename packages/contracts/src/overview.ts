import { z } from 'zod';
import { minorUnitsSchema } from './amount.ts';
import { operationStateSchema, operationViewSchema } from './operation.ts';

/** A sum in minor units, zero allowed (an empty queue holds nothing). */
const sumMinor = minorUnitsSchema;

/**
 * The operator's Overview (what an operator looks at first): one read of what needs
 * attention now. Amounts are exact minor units as strings; durations are seconds.
 */
export const overviewSchema = z.object({
  generatedAt: z.string(),
  /** Withdrawals not yet settled, per state, now (settled states are in `hourly`). */
  openByState: z.array(z.object({ state: operationStateSchema, count: z.number().int() })),
  /** Withdrawals created in each of the last 24 hours, by the state each is in now. */
  hourly: z.array(z.object({ hour: z.string(), state: operationStateSchema, count: z.number().int() })),
  /** What customers' withdrawals hold per asset (every holding state). */
  held: z.array(z.object({ asset: z.string(), heldMinor: sumMinor, withdrawals: z.number().int() })),
  /** The oldest withdrawal of each queue an operator watches, or null when the queue is empty. */
  oldest: z.array(
    z.object({
      queue: z.enum(['UNKNOWN', 'BROADCAST', 'AWAITING_APPROVAL']),
      operationId: z.uuid().nullable(),
      reference: z.string().nullable(),
      since: z.string().nullable(),
      ageSeconds: z.number().int().nullable(),
    }),
  ),
  /** Submit (created) to CONFIRMED, for withdrawals confirmed over the last 24 hours. */
  latency: z.object({
    confirmed: z.number().int(),
    p50Seconds: z.number().nullable(),
    p95Seconds: z.number().nullable(),
    hourly: z.array(
      z.object({
        hour: z.string(),
        confirmed: z.number().int(),
        p50Seconds: z.number(),
        p95Seconds: z.number(),
      }),
    ),
  }),
  openBreaks: z.number().int(),
  /**
   * Per asset: what is approved and not settled (it may still leave the hot wallet) against what
   * the last finished balance reconciliation observed on chain. No live balance is invented: when
   * no run observed the place, `observedMinor` is null and the screen says so.
   */
  hotWallets: z.array(
    z.object({
      asset: z.string(),
      network: z.string(),
      walletConfigured: z.boolean(),
      pendingOutflowMinor: sumMinor,
      observedMinor: z.string().nullable(),
      observedAt: z.string().nullable(),
      observedBlock: z.number().int().nullable(),
    }),
  ),
  deadLettered: z.object({ workItems: z.number().int(), deliveries: z.number().int() }),
});
export type Overview = z.infer<typeof overviewSchema>;

export const explorerSorts = ['created_desc', 'created_asc', 'amount_desc', 'amount_asc'] as const;
export const explorerSortSchema = z.enum(explorerSorts);
export type ExplorerSort = z.infer<typeof explorerSortSchema>;

/** The Withdrawals explorer's filter; every field optional, all combined with AND. */
export const explorerFilterSchema = z.strictObject({
  state: operationStateSchema.optional(),
  asset: z.string().min(1).max(32).optional(),
  accountId: z.string().min(1).max(200).optional(),
  /** Matched exactly (an address is never searched by prefix). */
  destination: z.string().min(1).max(200).optional(),
  amountMinMinor: sumMinor.optional(),
  amountMaxMinor: sumMinor.optional(),
  /** Created at or after. */
  from: z.iso.datetime({ offset: true }).optional(),
  /** Created before. */
  to: z.iso.datetime({ offset: true }).optional(),
  sort: explorerSortSchema.default('created_desc'),
});
export type ExplorerFilter = z.input<typeof explorerFilterSchema>;

export const explorerListInputSchema = explorerFilterSchema.extend({
  cursor: z.string().min(1).max(300).optional(),
  limit: z.number().int().min(1).max(100).default(50),
});
export type ExplorerListInput = z.input<typeof explorerListInputSchema>;

export const explorerPageSchema = z.object({
  items: z.array(operationViewSchema),
  nextCursor: z.string().nullable(),
});

/** An export is the filter without paging: at most this many rows, in the filter's order. */
export const EXPLORER_EXPORT_MAX = 10_000;
export const explorerExportOutputSchema = z.object({
  csv: z.string(),
  rows: z.number().int(),
  truncated: z.boolean(),
});
