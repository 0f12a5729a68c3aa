import { z } from 'zod';

export const IDEMPOTENCY_KEY_LENGTH_MAX = 255;

/**
 * Keys are opaque (C23). They end up in logs, traces and support tools, so a key that looks like an
 * e-mail address is refused rather than stored: it would put personal data in the immutable core.
 */
export const idempotencyKeySchema = z
  .string({ error: 'idempotency key is required' })
  .min(1, { error: 'idempotency key must not be empty' })
  .max(IDEMPOTENCY_KEY_LENGTH_MAX, {
    error: `idempotency key is longer than ${IDEMPOTENCY_KEY_LENGTH_MAX} characters`,
  })
  .regex(/^[\x21-\x7e]+$/, { error: 'idempotency key must be printable ASCII without spaces' })
  .refine((key) => !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(key), {
    error: 'idempotency key looks like an e-mail address; use an opaque identifier such as withdrawal-<id>',
  });

/** References (the integrator's withdrawal id, an account reference) follow the same opacity rule. */
export const referenceSchema = z
  .string()
  .min(1, { error: 'reference must not be empty' })
  .max(128, { error: 'reference is longer than 128 characters' })
  .regex(/^[A-Za-z0-9._:-]+$/, { error: 'reference may contain letters, digits and . _ : - only' });

/**
 * The key for one withdrawal: `withdrawal-<your withdrawal id>`, one key per withdrawal, never per
 * attempt (seed 002). Derive it from the id you already store, so every retry, restart and redeploy
 * sends the same key. Refuses an empty or blank id, which would make unrelated withdrawals share a
 * key. The SDK exports this same function.
 */
export function withdrawalKey(withdrawalId: string | number | bigint): string {
  const id = String(withdrawalId);
  if (id.trim() === '' || id !== id.trim()) {
    throw new TypeError('withdrawalKey: the withdrawal id must be non-empty, without surrounding whitespace');
  }
  return `withdrawal-${id}`;
}
