import { z } from 'zod';
import { operationStateSchema, payloadHashSchema } from './operation.ts';
import { passkeyAssertionSchema } from './passkeys.ts';

/** A staff decision on a withdrawal under review, bound to the payload hash shown (C02, four eyes). */

const uuid = z.uuid();

export const approvalEntrySchema = z.object({
  approver: z.string(),
  decision: z.enum(['approve', 'reject']),
  payloadHash: z.string(),
  reason: z.string().nullable(),
  /** The passkey that signed this decision (I32-PASSKEY), or null: decided without one. */
  passkeyCredentialId: z.string().nullable(),
  createdAt: z.string(),
});

export const decideInputSchema = z.strictObject({
  operationId: uuid,
  payloadHash: payloadHashSchema,
  decision: z.enum(['approve', 'reject']),
  reason: z.string().trim().max(500).optional(),
  /**
   * The approver's passkey assertion over approvalChallenge(operationId, payloadHash, decision):
   * required to approve once the approver has an active passkey (docs/GOVERNANCE.md "Passkeys").
   */
  assertion: passkeyAssertionSchema.optional(),
});
export const decideOutputSchema = z.object({
  state: operationStateSchema,
  approvalsGiven: z.number().int(),
  approvalsRequired: z.number().int(),
});
