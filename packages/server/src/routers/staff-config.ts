import {
  apiKeyViewSchema,
  controlChangeOutcomeSchema,
  createApiKeyInputSchema,
  createdApiKeySchema,
  createdEndpointSchema,
  createInboundEndpointInputSchema,
  createOutboundEndpointInputSchema,
  disableEndpointInputSchema,
  endpointsViewSchema,
  governanceSettingsInputSchema,
  governanceViewSchema,
  policyChangeViewSchema,
  revokeApiKeyInputSchema,
  riskRulesViewSchema,
  rotatedEndpointSecretSchema,
  rotateEndpointSecretInputSchema,
  setApiKeyScopesInputSchema,
  setRiskRuleInputSchema,
} from '@idem/contracts';
import {
  changeApiKeyScopes,
  changeGovernance,
  changeRiskRule,
  createWebhookEndpoint,
  disableEndpoint,
  governanceView,
  listApiKeys,
  listEndpoints,
  listRiskRules,
  proposeApiKey,
  proposeOutboundEndpoint,
  revokeApiKey,
  riskRuleHistory,
  rotateEndpointSecret,
  STRICT_EGRESS,
} from '@idem/core';
import { z } from 'zod';
import { staffWith, staffWithFresh } from '../auth/procedures.ts';
import { router } from '../trpc.ts';

/**
 * Configuration that needed the CLI: API keys, webhook endpoints and risk rules. Every
 * change is an administrator's, needs a fresh TOTP code (step-up, when the member uses MFA) and is
 * audited by the staff procedure. What loosens (a new key, an added scope, a new outbound endpoint,
 * a raised risk limit) is a control change other admins approve (docs/GOVERNANCE.md).
 *
 * The endpoint creations run in their own transactions (core's functions open them), so the audit
 * entry is written after them by the staff procedure, outcome 'ok' or the refusal's code.
 */
const change = staffWithFresh('administer');

export const staffConfigRouter = router({
  /**
   * Labels, prefixes, scopes, owners (who minted and last widened each key), expiry, created, last
   * used, revoked: never a key. Operators read it too.
   */
  apiKeys: staffWith('operate')
    .output(z.array(apiKeyViewSchema))
    .query(({ ctx }) => ctx.inTenant((tx) => listApiKeys(tx, ctx.tenantId))),

  /**
   * Mints a key with the scopes and expiry the admin chose, recording them as its minter (four eyes
   * refuses them on what the key submits); the answer is the only place the key ever appears. A new
   * key loosens: it is stored inactive and its activation proposed (PROPOSED), so it authenticates
   * only once another admin approves and the tenant's delay has passed; a tenant with one admin
   * mints none here (FORBIDDEN, nothing stored).
   */
  createApiKey: change
    .input(createApiKeyInputSchema)
    .output(createdApiKeySchema.extend(controlChangeOutcomeSchema.shape))
    .mutation(async ({ ctx, input }) => {
      const created = await ctx.inTenant((tx) =>
        proposeApiKey(tx, ctx.tenantId, {
          label: input.label,
          scopes: input.scopes,
          expiresAt: input.expiresAt ? new Date(input.expiresAt) : null,
          createdBy: ctx.actor,
        }),
      );
      return {
        keyId: created.keyId,
        apiKey: created.apiKey,
        label: input.label,
        scopes: created.scopes,
        expiresAt: created.expiresAt?.toISOString() ?? null,
        outcome: created.outcome,
        proposalId: created.proposalId,
        approvalsRequired: created.approvalsRequired,
      };
    }),

  /**
   * Replaces a key's scopes. Removing scopes applies at once (APPLIED), and this server's key cache
   * forgets the key, so the narrowing applies to its next request here (within IDEM_API_KEY_CACHE_MS
   * on other servers). Adding any is proposed (PROPOSED; the answer carries the scopes in force):
   * when it applies, this admin is the key's last widener.
   */
  setApiKeyScopes: change
    .input(setApiKeyScopesInputSchema)
    .output(
      controlChangeOutcomeSchema.extend({
        keyId: z.uuid(),
        scopes: z.array(z.string()),
        widened: z.boolean(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const changed = await ctx.inTenant((tx) =>
        changeApiKeyScopes(tx, ctx.tenantId, { keyId: input.keyId, scopes: input.scopes, actor: ctx.actor }),
      );
      ctx.apiKeyCache?.forget(input.keyId);
      return changed;
    }),

  /** Revokes a key; this server's key cache forgets it at once, so its next request is refused. */
  revokeApiKey: change
    .input(revokeApiKeyInputSchema)
    .output(z.object({ keyId: z.uuid() }))
    .mutation(async ({ ctx, input }) => {
      await revokeApiKey(ctx.db, ctx.tenantId, input.keyId);
      ctx.apiKeyCache?.forget(input.keyId);
      return { keyId: input.keyId };
    }),

  /** Inbound sources and outbound destinations, without their secrets. */
  endpoints: staffWith('operate')
    .output(endpointsViewSchema)
    .query(({ ctx }) => ctx.inTenant((tx) => listEndpoints(tx, ctx.tenantId))),

  createInboundEndpoint: change
    .input(createInboundEndpointInputSchema)
    .output(createdEndpointSchema)
    .mutation(async ({ ctx, input }) => {
      const { endpointId, secret } = await createWebhookEndpoint(ctx.db, ctx.tenantId, input);
      return { endpointId, secret };
    }),

  /**
   * Refused (VALIDATION, nothing written) unless the URL passes the deployment's egress policy:
   * https outside development, and a host that resolves only to public addresses or is allowlisted.
   * A new destination loosens: it is stored inactive with its signing secret (answered once, now)
   * and its activation proposed (PROPOSED); it receives nothing until another admin approves and
   * the tenant's delay has passed. A tenant with one admin adds none here (FORBIDDEN).
   */
  createOutboundEndpoint: change
    .input(createOutboundEndpointInputSchema)
    .output(createdEndpointSchema.extend(controlChangeOutcomeSchema.shape))
    .mutation(async ({ ctx, input }) => {
      const egress = ctx.egress ?? STRICT_EGRESS;
      const created = await proposeOutboundEndpoint(
        ctx.db,
        ctx.tenantId,
        { url: input.url, actor: ctx.actor },
        egress,
      );
      return {
        endpointId: created.endpointId,
        secret: created.secret,
        outcome: created.outcome,
        proposalId: created.proposalId,
        approvalsRequired: created.approvalsRequired,
      };
    }),

  /** A new secret (shown once); the old one stays valid for the overlap. */
  rotateEndpointSecret: change
    .input(rotateEndpointSecretInputSchema)
    .output(rotatedEndpointSecretSchema)
    .mutation(({ ctx, input }) => ctx.inTenant((tx) => rotateEndpointSecret(tx, ctx.tenantId, input))),

  disableEndpoint: change
    .input(disableEndpointInputSchema)
    .output(z.object({ endpointId: z.string() }))
    .mutation(({ ctx, input }) =>
      ctx.inTenant(async (tx) => {
        await disableEndpoint(tx, ctx.tenantId, input);
        return { endpointId: input.endpointId };
      }),
    ),

  /** Every staff member may read the rules the queues they work follow. */
  riskRules: staffWith('read')
    .output(riskRulesViewSchema)
    .query(({ ctx }) => ctx.inTenant((tx) => listRiskRules(tx, ctx.tenantId))),

  riskHistory: staffWith('read')
    .output(z.array(policyChangeViewSchema))
    .query(({ ctx }) => ctx.inTenant((tx) => riskRuleHistory(tx, ctx.tenantId))),

  /**
   * Lowering a limit applies at once; raising any (auto-approve, four-eyes, velocity) is proposed to
   * the other admins and applies after the tenant's delay (PROPOSED, with the proposal to approve).
   */
  setRiskRule: change
    .input(setRiskRuleInputSchema)
    .output(
      controlChangeOutcomeSchema.extend({ changed: z.boolean(), policyVersion: z.number().int().nullable() }),
    )
    .mutation(({ ctx, input }) => ctx.inTenant((tx) => changeRiskRule(tx, ctx.tenantId, input, ctx.actor))),

  /** The quorum, the loosening delay, the proposal lifetime, and the mode the admins put the tenant in. */
  governance: staffWith('read')
    .output(governanceViewSchema)
    .query(({ ctx }) => ctx.inTenant((tx) => governanceView(tx, ctx.tenantId))),

  /**
   * Every change to the governance settings is proposed to the other admins, but requiring passkeys
   * for approvals alone (a tightening: at once).
   */
  setGovernance: change
    .input(governanceSettingsInputSchema)
    .output(controlChangeOutcomeSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        changeGovernance(tx, { tenantId: ctx.tenantId, settings: input, actor: ctx.actor }),
      ),
    ),
});
