import { z } from 'zod';
import { operationStateSchema, payloadHashSchema } from './operation.ts';

/** A staff decision on a withdrawal under review, bound to the payload hash shown (C02, four eyes). */

const uuid = z.uuid();

export const approvalEntrySchema = z.object({
  approver: z.string(),
  decision: z.enum(['approve', 'reject']),
  payloadHash: z.string(),
  reason: z.string().nullable(),
  createdAt: z.string(),
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
