import { z } from 'zod';
import { amountMinorSchema } from './amount.ts';
import { assetCodeSchema } from './asset-code.ts';
import { referenceSchema } from './key.ts';
import { networkSchema } from './network.ts';
import {
  memoSchema,
  operationStateSchema,
  operationViewSchema,
  payloadHashSchema,
  submitOutcomeSchema,
} from './operation.ts';
import { cursorSchema } from './paging.ts';
import { staffRoleSchema } from './staff-roles.ts';

/**
 * The shapes of the web screens' procedures (staff and customer), shared by the server's
 * `.input()`/`.output()` and the web app.
 */

const uuid = z.uuid();
const cursor = cursorSchema.optional();
const pageLimit = z.number().int().min(1).max(100).default(25);

/** A brand's primary colour, a 6-digit hex such as #1c7ed6 (the database checks the same). */
export const primaryColorSchema = z
  .string()
  .regex(/^#[0-9a-fA-F]{6}$/, { error: 'colour must look like #1c7ed6' });

/** A tenant's brand. The colour is a 6-digit hex; the logo must be served over https. */
export const brandingSchema = z.strictObject({
  displayName: z.string().trim().min(1).max(80),
  logoUrl: z
    .string()
    .max(500)
    .regex(/^https:\/\/[^\s"'<>]+$/, { error: 'logo URL must be an https:// address' })
    .nullable(),
  primaryColor: primaryColorSchema,
});
export type BrandingView = z.infer<typeof brandingSchema>;

/**
 * An organisation's slug: what staff type at sign-in instead of a tenant id (issue 14). Lower case
 * letters, digits and inner hyphens; compared case-insensitively.
 */
export const organisationSlugSchema = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?$/, {
    error: 'organisation: 1..48 of a-z, 0-9 and inner hyphens',
  });

/**
 * Staff sign-in: e-mail and password, and the organisation's slug, or nothing when the e-mail
 * belongs to one organisation only. `tenantId` is still accepted in place of the slug (older links
 * `/staff/login?tenant=<id>` and scripts).
 */
export const staffSignInInputSchema = z.strictObject({
  organisation: organisationSlugSchema.optional(),
  tenantId: uuid.optional(),
  email: z.string().trim().min(3).max(254),
  password: z.string().min(1).max(1024),
});

/**
 * Where the session stands with TOTP: `off` (not required, not enrolled), `enrol` (required and not
 * enrolled: only enrolment is allowed), `verify` (enrolled, no code yet in this session), `ok`
 * (a code verified; `freshUntil` is when step-up will ask again).
 */
export const staffMfaStatusSchema = z.object({
  state: z.enum(['off', 'enrol', 'verify', 'ok']),
  freshUntil: z.string().nullable(),
});
export type StaffMfaStatus = z.infer<typeof staffMfaStatusSchema>;

export const staffMeSchema = z.object({
  userId: uuid,
  tenantId: uuid,
  email: z.string(),
  role: staffRoleSchema,
  /** Sent back in the `x-csrf-token` header on every mutation of this session. */
  csrfToken: z.string(),
  expiresAt: z.string(),
  mfa: staffMfaStatusSchema,
});
export type StaffMe = z.infer<typeof staffMeSchema>;

export const customerMeSchema = z.object({
  tenantId: uuid,
  accountId: z.string(),
  csrfToken: z.string(),
  expiresAt: z.string(),
  branding: brandingSchema,
});
export type CustomerMe = z.infer<typeof customerMeSchema>;

/** What the operator's backend asks for: a short-lived session for one of its accounts. */
export const createCustomerSessionInputSchema = z.strictObject({
  accountId: referenceSchema,
  /** How long the one-time link stays usable; 10 minutes by default, at most an hour. */
  expiresInSeconds: z.number().int().min(10).max(3600).optional(),
});
export const createCustomerSessionOutputSchema = z.object({ url: z.string(), expiresAt: z.string() });
export type CreateCustomerSessionOutput = z.infer<typeof createCustomerSessionOutputSchema>;

export const exchangeCustomerLinkInputSchema = z.strictObject({ token: z.string().min(1).max(200) });

/**
 * A customer's withdrawal. `intentId` is minted once per intent in the browser and kept across a
 * reload; the withdrawal id and the idempotency key derive from it, so every resubmission of one
 * intent reaches the same operation.
 */
export const customerWithdrawInputSchema = z.strictObject({
  intentId: uuid,
  asset: assetCodeSchema,
  destination: z.string().trim().min(1).max(128),
  memo: memoSchema.optional(),
  amountMinor: amountMinorSchema,
  /**
   * The person saw this in-progress withdrawal of the account with the same asset, destination and
   * amount, and confirmed they want another one (I14-DEVICE). Without it such a repeat is refused
   * with POSSIBLE_DUPLICATE.
   */
  confirmDuplicateOf: uuid.optional(),
});
export const withdrawOutputSchema = z.object({
  outcome: submitOutcomeSchema,
  withdrawal: operationViewSchema,
});

export const pageInputSchema = z.strictObject({ cursor, limit: pageLimit });
export const operationIdInputSchema = z.strictObject({ operationId: uuid });

export const timelineEntrySchema = z.object({
  seq: z.number().int(),
  fromState: z.string().nullable(),
  toState: z.string(),
  actor: z.string(),
  reason: z.string(),
  evidence: z.record(z.string(), z.unknown()).nullable(),
  createdAt: z.string(),
});
export type TimelineEntry = z.infer<typeof timelineEntrySchema>;

/** The customer sees when their withdrawal moved, never who moved it or on which evidence. */
export const customerTimelineEntrySchema = timelineEntrySchema.pick({
  seq: true,
  fromState: true,
  toState: true,
  createdAt: true,
});
export const customerOperationDetailSchema = z.object({
  withdrawal: operationViewSchema,
  timeline: z.array(customerTimelineEntrySchema),
  /** The transaction on the operator's block explorer for its network; null without a hash or a template. */
  explorerUrl: z.string().nullable(),
});

/**
 * A block explorer's transaction page for one network, as an https URL template with exactly one
 * `{txHash}` placeholder (e.g. `https://etherscan.io/tx/{txHash}`), set by an admin per tenant.
 */
export const explorerTemplateSchema = z
  .string()
  .trim()
  .max(300)
  .regex(/^https:\/\/[A-Za-z0-9.-]+(:[0-9]{1,5})?\/[^\s"'<>{}]*\{txHash\}[^\s"'<>{}]*$/, {
    error: 'the template must be an https:// URL containing {txHash} once',
  });
export const setExplorerInputSchema = z.strictObject({
  network: networkSchema,
  /** null removes the link for that network. */
  txUrlTemplate: explorerTemplateSchema.nullable(),
});
export const explorerSettingSchema = z.object({
  network: networkSchema,
  txUrlTemplate: z.string().nullable(),
});
export type ExplorerSetting = z.infer<typeof explorerSettingSchema>;

/** The transaction's page from a stored template; the hash is URL-encoded though hashes are hex. */
export function explorerTxUrl(template: string | null, txHash: string | null): string | null {
  if (!template || !txHash) return null;
  return template.replace('{txHash}', encodeURIComponent(txHash));
}

export const approvalEntrySchema = z.object({
  approver: z.string(),
  decision: z.enum(['approve', 'reject']),
  payloadHash: z.string(),
  reason: z.string().nullable(),
  createdAt: z.string(),
});

/** An operation as staff see it: with its payload hash, review outcome, owner and history. */
export const staffOperationViewSchema = operationViewSchema.extend({
  payloadHash: z.string(),
  policyVersion: z.number().int(),
  riskFlags: z.array(z.string()).nullable(),
  approvalsRequired: z.number().int().nullable(),
  owner: z.string().nullable(),
  version: z.number().int(),
  /** Seconds since the operation last changed state or owner. */
  ageSeconds: z.number().int(),
  requester: z.string(),
  approvals: z.array(approvalEntrySchema),
  allowedNext: z.array(operationStateSchema),
});
export type StaffOperationView = z.infer<typeof staffOperationViewSchema>;
export const staffOperationPageSchema = z.object({
  items: z.array(staffOperationViewSchema),
  nextCursor: z.string().nullable(),
});
export const staffOperationDetailSchema = z.object({
  operation: staffOperationViewSchema,
  timeline: z.array(timelineEntrySchema),
});

/**
 * The queues staff watch: sent and not yet mined (BROADCAST, issue 12), outcome unknown, stopped
 * for a person. Oldest first by when each entered its state.
 */
export const attentionQueueInputSchema = z.strictObject({
  state: z.enum(['BROADCAST', 'UNKNOWN', 'FAILED_TERMINAL']),
  cursor,
  limit: pageLimit,
});
export const attentionQueueItemSchema = staffOperationViewSchema.extend({
  /** When the operation last entered its current state (for BROADCAST: when it was broadcast). */
  stateSince: z.string(),
  stateAgeSeconds: z.number().int(),
  /**
   * The age past which the workers alert on it, as this server is configured for its network
   * (IDEM_BROADCAST_ALERT_AFTER_MS or the defaults); null when there is none (UNKNOWN, FAILED_TERMINAL).
   */
  alertAfterSeconds: z.number().int().nullable(),
});
export type AttentionQueueItem = z.infer<typeof attentionQueueItemSchema>;
export const attentionQueuePageSchema = z.object({
  items: z.array(attentionQueueItemSchema),
  nextCursor: z.string().nullable(),
});

export const decideInputSchema = z.strictObject({
  operationId: uuid,
  payloadHash: payloadHashSchema,
  decision: z.enum(['approve', 'reject']),
  reason: z.string().trim().max(500).optional(),
});
export const decideOutputSchema = z.object({
  state: operationStateSchema,
  approvalsGiven: z.number().int(),
  approvalsRequired: z.number().int(),
});

/** Evidence a runbook action records in the operation's history. */
export const runbookEvidenceSchema = z.strictObject({
  summary: z.string().trim().min(10, { error: 'say what was checked, in at least 10 characters' }).max(2000),
  txHash: z.string().trim().max(200).optional(),
  custodianRecord: z.string().trim().max(500).optional(),
});

export const assignOwnerInputSchema = z.strictObject({
  operationId: uuid,
  owner: z.string().trim().min(1).max(100),
  reason: z.string().trim().min(3).max(500),
});

/**
 * Stop before signing (issue 12): an APPROVED withdrawal no worker has claimed goes to REJECTED
 * (code STOPPED_BY_STAFF) and its hold is released. The reason is recorded in the history.
 */
export const stopWithdrawalInputSchema = z.strictObject({
  operationId: uuid,
  reason: z.string().trim().min(10).max(500),
});

// Manual resolution is a proposal (proposals.ts, kind resolve_withdrawal), approved by another person.

/**
 * A withdrawal a staff member makes for an account. `onBehalfOf` names the account holder's own
 * request it carries out (a ticket, a recorded call): then one other staff member must approve it;
 * without it the staff member acts on their own and two others must approve (I11-F3).
 */
export const staffWithdrawInputSchema = z.strictObject({
  intentId: uuid,
  accountId: referenceSchema,
  asset: assetCodeSchema,
  destination: z.string().trim().min(1).max(128),
  memo: memoSchema.optional(),
  amountMinor: amountMinorSchema,
  onBehalfOf: z.strictObject({ customerRequestRef: z.string().trim().min(3).max(200) }).optional(),
});

export const searchInputSchema = z.strictObject({ query: z.string().trim().min(1).max(200) });

export const inboxItemSchema = z.object({
  kind: z.enum(['quarantined', 'unhandled']),
  source: z.string(),
  eventId: z.string(),
  detail: z.string(),
  receivedAt: z.string(),
  /** At most 2,000 characters of the body as received, for a person to read. */
  bodyExcerpt: z.string(),
});
export const inboxOutputSchema = z.array(inboxItemSchema);

export const breakViewSchema = z.object({
  breakId: uuid,
  breakClass: z.string(),
  subject: z.string(),
  assetCode: z.string().nullable(),
  ledgerAmountMinor: z.string().nullable(),
  observedAmountMinor: z.string().nullable(),
  owner: z.string(),
  status: z.string(),
  openedAt: z.string(),
  closedAt: z.string().nullable(),
  closedBy: z.string().nullable(),
  closureEvidence: z.record(z.string(), z.unknown()).nullable(),
  /** resolved (a person), arrived (the item came), escalated (see the break that names it). */
  closedAs: z.enum(['resolved', 'arrived', 'escalated']).nullable(),
  /** The timing break this genuine_variance escalated (docs/RECONCILIATION.md). */
  escalatedFrom: uuid.nullable(),
  /** Why the break was opened (the finding's reason). */
  reason: z.string().nullable(),
});
export const breaksInputSchema = z.strictObject({ status: z.enum(['open', 'closed']).optional() });
export const closeBreakInputSchema = z.strictObject({ breakId: uuid, evidence: runbookEvidenceSchema });
