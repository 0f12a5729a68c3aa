import { z } from 'zod';
import { AMOUNT_DIGITS_MAX } from './amount.ts';

/** A signed integer amount in minor units, zero allowed (differences, control accounts). */
export const signedMinorSchema = z
  .string()
  .max(AMOUNT_DIGITS_MAX + 1)
  .regex(/^(0|-?[1-9][0-9]*)$/, { error: 'a signed integer in minor units' });

/** Where money is held: 'chain:<network>' (hot wallet and deposit addresses) or 'custodian:<account>'. */
export const holdingPlaceSchema = z.string().regex(/^(chain|custodian):[a-z0-9_-]{1,64}$/);

export const explanationSchema = z.object({
  /** withdrawal_mined_not_settled | gas_of_unsettled_withdrawal | deposit_seen_not_credited | custodian_completed_not_settled */
  kind: z.string().max(64),
  subject: z.string().max(200),
  /** Signed: what the item adds to (positive) or takes from (negative) the observed balance. */
  amountMinor: signedMinorSchema,
});
export type Explanation = z.infer<typeof explanationSchema>;

export const runFigureSchema = z.object({
  place: holdingPlaceSchema,
  assetCode: z.string(),
  liabilitiesAvailableMinor: signedMinorSchema,
  liabilitiesHeldMinor: signedMinorSchema,
  custodyControlMinor: signedMinorSchema,
  feeExpenseMinor: signedMinorSchema,
  inFlightWithdrawalsMinor: signedMinorSchema,
  expectedMinor: signedMinorSchema,
  observedMinor: signedMinorSchema.nullable(),
  explainedMinor: signedMinorSchema,
  unexplainedMinor: signedMinorSchema.nullable(),
  explanations: z.array(explanationSchema),
  pinnedBlock: z.number().int().nonnegative().nullable(),
  reportedAt: z.string().nullable(),
  accountTenants: z.number().int().positive(),
  breakId: z.uuid().nullable(),
});
export type RunFigure = z.infer<typeof runFigureSchema>;

export const runResultSchema = z.enum(['balanced', 'explained', 'variance', 'incomplete']);
export type RunResult = z.infer<typeof runResultSchema>;

export const reconciliationRunSchema = z.object({
  runId: z.uuid(),
  tenantId: z.uuid(),
  ranBy: z.string(),
  trigger: z.enum(['schedule', 'on_demand']),
  inputs: z.record(z.string(), z.unknown()),
  status: z.enum(['running', 'finished', 'failed']),
  result: runResultSchema.nullable(),
  breaksOpened: z.number().int().nonnegative(),
  note: z.string().nullable(),
  startedAt: z.string(),
  finishedAt: z.string().nullable(),
});
export type ReconciliationRun = z.infer<typeof reconciliationRunSchema>;

export const reconciliationRunDetailSchema = reconciliationRunSchema.extend({
  figures: z.array(runFigureSchema),
});
export type ReconciliationRunDetail = z.infer<typeof reconciliationRunDetailSchema>;

/**
 * The report an auditor receives: the run and its figures, signed with Standard Webhooks
 * (`webhook-id` = the run id, a timestamp, and an HMAC-SHA256 signature over the exact `payload`
 * string) using the tenant's outbound-webhook signing secret. `payload` is the JSON of the run
 * detail; verification checks the signature over it, then parses it.
 */
export const webhookSignedRunReportSchema = z.object({
  format: z.literal('idem.reconciliation-run.v1'),
  signature: z.object({
    scheme: z.literal('standard-webhooks'),
    id: z.string().min(1).max(128),
    timestamp: z.string().regex(/^\d{1,12}$/),
    signature: z.string().min(1).max(2_048),
    /** Which outbound endpoint's secret signed it (the secret itself is never in the report). */
    endpointId: z.uuid(),
  }),
  payload: z.string().max(4_000_000),
});

/**
 * The report signed by the signer service's own Ed25519 key (I32-SIGNER), which the tenant does
 * not hold: the service reads the run from the database itself and signs
 * `idem.reconciliation-run.v2\n` followed by the exact `payload`. The public key is published by
 * the server (GET /report-key.json) and by the service; `keyId` is the first 16 hex digits of the
 * SHA-256 of its DER (SPKI) encoding.
 */
export const signerSignedRunReportSchema = z.object({
  format: z.literal('idem.reconciliation-run.v2'),
  signature: z.object({
    scheme: z.literal('ed25519'),
    keyId: z.string().regex(/^[0-9a-f]{16}$/),
    signature: z.string().regex(/^[A-Za-z0-9+/]{86}==$/),
  }),
  payload: z.string().max(4_000_000),
});

export const signedRunReportSchema = z.discriminatedUnion('format', [
  webhookSignedRunReportSchema,
  signerSignedRunReportSchema,
]);
export type SignedRunReport = z.infer<typeof signedRunReportSchema>;

/** The signer service's report key, as the server publishes it. */
export const reportKeySchema = z.object({
  algorithm: z.literal('ed25519'),
  keyId: z.string().regex(/^[0-9a-f]{16}$/),
  /** PEM (SPKI). */
  publicKey: z.string().min(1).max(1_000),
});
export type ReportKey = z.infer<typeof reportKeySchema>;

/** What the signer service signs for a report: this line, then the payload (UTF-8). */
export const SIGNER_REPORT_PREFIX = 'idem.reconciliation-run.v2\n';

/** One place and asset of one finished run, for the chart of ledger against observed over time. */
export const runHistoryPointSchema = z.object({
  runId: z.uuid(),
  finishedAt: z.string(),
  place: holdingPlaceSchema,
  assetCode: z.string(),
  expectedMinor: signedMinorSchema,
  observedMinor: signedMinorSchema.nullable(),
});
export type RunHistoryPoint = z.infer<typeof runHistoryPointSchema>;

export const runReconciliationInputSchema = z.strictObject({});
export const listRunsInputSchema = z.strictObject({
  limit: z.number().int().min(1).max(200).optional(),
});
export const getRunInputSchema = z.strictObject({ runId: z.uuid() });
