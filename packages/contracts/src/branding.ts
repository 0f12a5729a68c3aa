import { z } from 'zod';
import { networkSchema } from './network.ts';

/**
 * What a tenant's customers see of the operator: its brand on the customer screens and, per
 * network, the block explorer their transactions link to. Set by an admin (branding.* procedures).
 */

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
