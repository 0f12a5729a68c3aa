import { type OperationWebhook, operationWebhookSchema } from '@idem/contracts';
import { Webhook } from 'standardwebhooks';

/**
 * Verifies an Idem webhook against the raw body (exactly as received, before any JSON parsing)
 * and the endpoint's secret, then parses it. Throws on a bad signature, a stale timestamp (more
 * than 5 minutes off) or an unexpected body. Deduplicate on the `webhook-id` header: a
 * notification may arrive more than once.
 */
export function verifyWebhook(
  rawBody: string,
  headers: Record<string, string | string[] | undefined>,
  secret: string,
): OperationWebhook {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value === 'string') flat[name.toLowerCase()] = value;
    else if (Array.isArray(value) && typeof value[0] === 'string') flat[name.toLowerCase()] = value[0];
  }
  const verified = new Webhook(secret).verify(rawBody, flat);
  return operationWebhookSchema.parse(verified);
}
