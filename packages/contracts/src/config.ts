import { z } from 'zod';
import { AMOUNT_DIGITS_MAX } from './amount.ts';

/**
 * The staff configuration screens: API keys, webhook endpoints with secret rotation,
 * and risk rules per asset. Secrets appear only in the answer to the call that made them.
 */

export const apiKeyViewSchema = z.object({
  keyId: z.uuid(),
  label: z.string(),
  /** The key's non-secret start and a few characters of its secret, to tell keys apart. */
  prefix: z.string(),
  createdAt: z.iso.datetime(),
  /** To the minute: recorded at most once a minute per key. */
  lastUsedAt: z.iso.datetime().nullable(),
  revokedAt: z.iso.datetime().nullable(),
});
export type ApiKeyView = z.infer<typeof apiKeyViewSchema>;

export const createApiKeyInputSchema = z.strictObject({
  label: z.string().trim().min(1, { error: 'a key needs a label' }).max(120),
});
export const createdApiKeySchema = z.object({
  keyId: z.uuid(),
  label: z.string(),
  /** Shown once; only its hash is stored. */
  apiKey: z.string(),
});
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
  .regex(/^(0|[1-9][0-9]*)$/, {
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
  return /^[0-9]+$/.test(rule.autoApproveMaxMinor) && /^[0-9]+$/.test(rule.fourEyesMinMinor);
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
