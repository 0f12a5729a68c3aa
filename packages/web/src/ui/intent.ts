import { z } from 'zod';

/**
 * A withdrawal intent: what the person confirmed, and the id minted once for it. Kept in
 * sessionStorage, so a reload mid-submit finds the same id and resubmits the same operation; a new
 * id is minted only when the person starts a new withdrawal.
 */
const intentSchema = z.object({
  intentId: z.uuid(),
  accountId: z.string().optional(),
  asset: z.string(),
  destination: z.string(),
  memo: z.string().optional(),
  amountMinor: z.string(),
  /** The in-progress withdrawal the person saw and confirmed they want another of (I14-DEVICE). */
  confirmDuplicateOf: z.uuid().optional(),
  /** 'submitting' from the click until an answer arrives: a reload in between resubmits. */
  status: z.enum(['confirming', 'submitting']),
});
export type Intent = z.infer<typeof intentSchema>;

export function loadIntent(storageKey: string): Intent | null {
  try {
    const parsed = intentSchema.safeParse(JSON.parse(sessionStorage.getItem(storageKey) ?? 'null'));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export function saveIntent(storageKey: string, intent: Intent): void {
  sessionStorage.setItem(storageKey, JSON.stringify(intent));
}

export function clearIntent(storageKey: string): void {
  sessionStorage.removeItem(storageKey);
}

export function newIntentId(): string {
  return crypto.randomUUID();
}
