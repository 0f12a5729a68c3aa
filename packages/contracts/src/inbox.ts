import { z } from 'zod';

/** Inbound webhooks the inbox could not act on, for a person to read (C19). */
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
