import { z } from 'zod';
import { AMOUNT_DIGITS_MAX, MINOR_UNITS } from './amount.ts';

/**
 * The staff configuration screens: API keys, webhook endpoints with secret rotation,
 * and risk rules per asset. Secrets appear only in the answer to the call that made them.
 */

/**
 * What an API key may do. Each API procedure and REST route requires exactly one: `withdraw`
 * (submit, alone or in bulk), `customer-sessions` (one-time customer links), `read` (withdrawals,
 * deposits, balances, assets), `webhooks` (reserved for managing webhook endpoints by API; no route
 * needs it yet). A key holds a set, so a reporting key cannot move money.
 */
export const apiKeyScopes = ['withdraw', 'customer-sessions', 'read', 'webhooks'] as const;
export type ApiKeyScope = (typeof apiKeyScopes)[number];
export const apiKeyScopeSchema = z.enum(apiKeyScopes);
/** A non-empty set, without repeats, in the order of `apiKeyScopes` once stored. */
export const apiKeyScopeSetSchema = z
  .array(apiKeyScopeSchema)
  .min(1, { error: 'a key needs at least one scope' })
  .max(apiKeyScopes.length)
  .refine((scopes) => new Set(scopes).size === scopes.length, { error: 'a scope is named twice' });

export const apiKeyViewSchema = z.object({
  keyId: z.uuid(),
  label: z.string(),
  /** The key's non-secret start and a few characters of its secret, to tell keys apart. */
  prefix: z.string(),
  scopes: z.array(apiKeyScopeSchema),
  createdAt: z.iso.datetime(),
  /** The staff member who minted it (`staff:<user id>`), `cli` or null for a key older than owners. */
  createdBy: z.string().nullable(),
  createdByEmail: z.string().nullable(),
  /** Who last added a scope, and when: four eyes treats them as the key's owner too. */
  widenedBy: z.string().nullable(),
  widenedByEmail: z.string().nullable(),
  widenedAt: z.iso.datetime().nullable(),
  /** Null: the key never expires (allowed, and the screen warns about it). */
  expiresAt: z.iso.datetime().nullable(),
  /** To the minute: recorded at most once a minute per key. */
  lastUsedAt: z.iso.datetime().nullable(),
  revokedAt: z.iso.datetime().nullable(),
  /**
   * Null while the key waits for another admin's approval (a control change, docs/GOVERNANCE.md):
   * until then it authenticates nothing.
   */
  activatedAt: z.iso.datetime().nullable(),
});
export type ApiKeyView = z.infer<typeof apiKeyViewSchema>;

/** Longest an expiry may lie ahead: about five years, so a typo cannot mean "forever". */
export const API_KEY_EXPIRY_DAYS_MAX = 5 * 366;

/** An expiry must lie in the future when the key is minted (and within the bound above). */
export const apiKeyExpirySchema = z.iso
  .datetime()
  .nullable()
  .refine((value) => value === null || Date.parse(value) > Date.now(), {
    error: 'the expiry must lie in the future',
  })
  .refine(
    (value) => value === null || Date.parse(value) < Date.now() + API_KEY_EXPIRY_DAYS_MAX * 86_400_000,
    {
      error: `the expiry must lie within ${API_KEY_EXPIRY_DAYS_MAX} days`,
    },
  );

export const createApiKeyInputSchema = z.strictObject({
  label: z.string().trim().min(1, { error: 'a key needs a label' }).max(120),
  scopes: apiKeyScopeSetSchema,
  /** Absent or null: no expiry. */
  expiresAt: apiKeyExpirySchema.optional(),
});
export type CreateApiKeyInput = z.infer<typeof createApiKeyInputSchema>;
export const createdApiKeySchema = z.object({
  keyId: z.uuid(),
  label: z.string(),
  scopes: z.array(apiKeyScopeSchema),
  expiresAt: z.iso.datetime().nullable(),
  /** Shown once; only its hash is stored. */
  apiKey: z.string(),
});
/** Replaces a key's scopes. Adding any scope records the caller as the key's widener. */
export const setApiKeyScopesInputSchema = z.strictObject({ keyId: z.uuid(), scopes: apiKeyScopeSetSchema });
export const revokeApiKeyInputSchema = z.strictObject({ keyId: z.uuid() });

export const endpointDirections = ['inbound', 'outbound'] as const;
export type EndpointDirection = (typeof endpointDirections)[number];

/** Longest overlap a rotation may give the old secret: one week. */
export const ROTATION_OVERLAP_MINUTES_MAX = 7 * 24 * 60;

const endpointLifecycle = {
  createdAt: z.iso.datetime(),
  rotatedAt: z.iso.datetime().nullable(),
  /** While in the future, the previous secret still verifies (inbound) or also signs (outbound). */
  previousSecretUntil: z.iso.datetime().nullable(),
  disabledAt: z.iso.datetime().nullable(),
};

export const inboundEndpointViewSchema = z.object({
  endpointId: z.string(),
  source: z.string(),
  ...endpointLifecycle,
});
export const outboundEndpointViewSchema = z.object({
  endpointId: z.uuid(),
  url: z.string(),
  ...endpointLifecycle,
  /** Null while the endpoint waits for another admin's approval: until then it receives nothing. */
  activatedAt: z.iso.datetime().nullable(),
});
export type InboundEndpointView = z.infer<typeof inboundEndpointViewSchema>;
export type OutboundEndpointView = z.infer<typeof outboundEndpointViewSchema>;

export const endpointsViewSchema = z.object({
  inbound: z.array(inboundEndpointViewSchema),
  outbound: z.array(outboundEndpointViewSchema),
});

export const createInboundEndpointInputSchema = z.strictObject({ source: z.string().max(63) });
export const createOutboundEndpointInputSchema = z.strictObject({ url: z.string().max(2048) });
export const createdEndpointSchema = z.object({ endpointId: z.string(), secret: z.string() });

export const rotateEndpointSecretInputSchema = z.strictObject({
  direction: z.enum(endpointDirections),
  endpointId: z.string().min(1).max(100),
  overlapMinutes: z
    .number()
    .int({ error: 'overlapMinutes must be a whole number of minutes' })
    .min(0, { error: 'overlapMinutes cannot be negative' })
    .max(ROTATION_OVERLAP_MINUTES_MAX, { error: 'overlapMinutes is at most one week' }),
});
export type RotateEndpointSecretInput = z.infer<typeof rotateEndpointSecretInputSchema>;
export const rotatedEndpointSecretSchema = z.object({
  endpointId: z.string(),
  /** Shown once. */
  secret: z.string(),
  previousSecretUntil: z.iso.datetime().nullable(),
});
export const disableEndpointInputSchema = z.strictObject({
  direction: z.enum(endpointDirections),
  endpointId: z.string().min(1).max(100),
});

/** A minor-unit amount that may be zero (an auto-approve limit of 0 approves nothing by itself). */
export const limitMinorSchema = z
  .string({ error: 'amounts are strings of digits in minor units' })
  .max(AMOUNT_DIGITS_MAX)
  .regex(MINOR_UNITS, {
    error: 'amounts must be whole, non-negative minor units, without sign, decimals or leading zeros',
  });

export const riskRuleViewSchema = z.object({
  assetCode: z.string(),
  decimals: z.number().int(),
  autoApproveMaxMinor: z.string(),
  fourEyesMinMinor: z.string(),
  velocityMaxPerHour: z.number().int(),
  similarWindowMinutes: z.number().int(),
  updatedAt: z.iso.datetime(),
});
export type RiskRuleView = z.infer<typeof riskRuleViewSchema>;

export const riskRulesViewSchema = z.object({
  rules: z.array(riskRuleViewSchema),
  /** Every asset of the tenant, ruled or not, with its decimals. */
  assets: z.array(z.object({ code: z.string(), decimals: z.number().int() })),
});

/**
 * One asset's rules. A withdrawal from `fourEyesMinMinor` on needs two approvals, so it can never
 * be approved by the system: an auto-approve limit at or above the four-eyes threshold would say
 * something the rules cannot do, and is refused.
 */
export const setRiskRuleInputSchema = z
  .strictObject({
    assetCode: z.string().min(1).max(20),
    autoApproveMaxMinor: limitMinorSchema,
    fourEyesMinMinor: limitMinorSchema.refine((v) => v !== '0', {
      error: 'the four-eyes threshold must be above zero',
    }),
    velocityMaxPerHour: z
      .number()
      .int({ error: 'velocity is a whole number of withdrawals per hour' })
      .min(0, { error: 'velocity cannot be negative' })
      .max(100_000)
      .default(10),
  })
  .refine((rule) => !digitsOnly(rule) || BigInt(rule.fourEyesMinMinor) > BigInt(rule.autoApproveMaxMinor), {
    error: 'the four-eyes threshold must be above the auto-approve limit',
    path: ['fourEyesMinMinor'],
  });
/** Guards the BigInt comparison when a field already failed its own check. */
function digitsOnly(rule: { autoApproveMaxMinor: string; fourEyesMinMinor: string }): boolean {
  return MINOR_UNITS.test(rule.autoApproveMaxMinor) && MINOR_UNITS.test(rule.fourEyesMinMinor);
}
export type SetRiskRuleInput = z.infer<typeof setRiskRuleInputSchema>;

export const policyChangeViewSchema = z.object({
  toVersion: z.number().int(),
  fromVersion: z.number().int(),
  assetCode: z.string().nullable(),
  before: z.record(z.string(), z.string()).nullable(),
  after: z.record(z.string(), z.string()).nullable(),
  actor: z.string(),
  /** The staff member's e-mail when the actor is one; null for the CLI or provisioning. */
  actorEmail: z.string().nullable(),
  changedAt: z.iso.datetime(),
});
export type PolicyChangeView = z.infer<typeof policyChangeViewSchema>;
