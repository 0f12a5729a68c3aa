import { z } from 'zod';
import { approvalEntrySchema } from './approvals.ts';
import { operationStateSchema, operationViewSchema } from './operation.ts';
import { cursorSchema, pageLimitSchema } from './paging.ts';

/**
 * Operations as the staff screens list, search and open them: the staff view (payload hash,
 * review outcome, owner, approvals, history) and the attention queues.
 */

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
 * The queues staff watch: sent and not yet mined (BROADCAST), outcome unknown, stopped
 * for a person. Oldest first by when each entered its state.
 */
export const attentionQueueInputSchema = z.strictObject({
  state: z.enum(['BROADCAST', 'UNKNOWN', 'FAILED_TERMINAL']),
  cursor: cursorSchema.optional(),
  limit: pageLimitSchema,
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

export const searchInputSchema = z.strictObject({ query: z.string().trim().min(1).max(200) });
