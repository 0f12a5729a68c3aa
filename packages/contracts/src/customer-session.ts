import { z } from 'zod';
import { brandingSchema } from './branding.ts';
import { referenceSchema } from './key.ts';

/**
 * A customer's session: the operator's backend asks for a one-time link for one of its accounts
 * (customerSessions.create), the browser exchanges it for a session cookie, `customer.me` answers.
 */

const uuid = z.uuid();

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
