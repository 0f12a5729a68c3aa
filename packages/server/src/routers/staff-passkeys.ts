import {
  approvalPasskeyInputSchema,
  passkeyCredentialIdSchema,
  passkeyViewSchema,
  proposalPasskeyInputSchema,
  registerPasskeyInputSchema,
  registerPasskeyOutputSchema,
} from '@idem/contracts';
import {
  approvalAssertionOptions,
  listPasskeys,
  passkeyRegistrationOptions,
  proposalAssertionOptions,
  registerPasskey,
  relyingPartyOf,
  revokePasskey,
} from '@idem/core';
import { z } from 'zod';
import { freshStaffProcedure, staffProcedure, staffWith } from '../auth/procedures.ts';
import { router } from '../trpc.ts';

/** WebAuthn options as @simplewebauthn/browser takes them (JSON, base64url buffers). */
const webAuthnOptionsSchema = z.record(z.string(), z.unknown());

/**
 * The Passkeys screen (docs/GOVERNANCE.md "Passkeys", I32-PASSKEY): a member's own passkeys. The
 * relying party is the deployment's public origin (IDEM_PUBLIC_URL; in development the request's
 * own), its host the RP ID. A registration's challenge is bound to the member and the session
 * (its stored hash, which the browser never sees), so any server recomputes it. Registering stores
 * the passkey inactive and proposes its activation to the other admins (PROPOSED), but for the
 * tenant's trust anchor (a lone admin's first passkey: APPLIED).
 */
export const staffPasskeysRouter = router({
  list: staffProcedure.output(z.object({ passkeys: z.array(passkeyViewSchema) })).query(async ({ ctx }) => ({
    passkeys: await ctx.inTenant((tx) => listPasskeys(tx, ctx.tenantId, ctx.staff.userId)),
  })),

  registrationOptions: freshStaffProcedure.output(webAuthnOptionsSchema).mutation(({ ctx }) =>
    ctx.inTenant(
      async (tx) =>
        (await passkeyRegistrationOptions(tx, {
          tenantId: ctx.tenantId,
          userId: ctx.staff.userId,
          email: ctx.staff.email,
          rp: relyingPartyOf(ctx.web.selfOrigin),
          sessionSecret: ctx.staff.sessionHash,
        })) as unknown as Record<string, unknown>,
    ),
  ),

  register: freshStaffProcedure
    .input(registerPasskeyInputSchema)
    .output(registerPasskeyOutputSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        registerPasskey(tx, {
          tenantId: ctx.tenantId,
          userId: ctx.staff.userId,
          label: input.label,
          registration: input.registration,
          rp: relyingPartyOf(ctx.web.selfOrigin),
          sessionSecret: ctx.staff.sessionHash,
        }),
      ),
    ),

  /** Revoking one's own passkey tightens: at once. */
  revoke: staffProcedure
    .input(z.strictObject({ credentialId: passkeyCredentialIdSchema }))
    .output(passkeyViewSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        revokePasskey(tx, ctx.tenantId, { userId: ctx.staff.userId, credentialId: input.credentialId }),
      ),
    ),

  /**
   * The options to sign one decision with: the challenge is approvalChallenge(operation, payload
   * hash, decision), the member's active passkeys allowed. Null when they have none.
   */
  approvalOptions: staffWith('decide')
    .input(approvalPasskeyInputSchema)
    .output(webAuthnOptionsSchema.nullable())
    .query(({ ctx, input }) =>
      ctx.inTenant(
        async (tx) =>
          (await approvalAssertionOptions(tx, {
            tenantId: ctx.tenantId,
            userId: ctx.staff.userId,
            ...input,
            rp: relyingPartyOf(ctx.web.selfOrigin),
          })) as unknown as Record<string, unknown> | null,
      ),
    ),

  /**
   * The options to sign one proposal decision with: the challenge is proposalChallenge(proposal,
   * payload hash, decision), the member's active passkeys allowed. Null when they have none.
   */
  proposalOptions: staffWith('decide')
    .input(proposalPasskeyInputSchema)
    .output(webAuthnOptionsSchema.nullable())
    .query(({ ctx, input }) =>
      ctx.inTenant(
        async (tx) =>
          (await proposalAssertionOptions(tx, {
            tenantId: ctx.tenantId,
            userId: ctx.staff.userId,
            ...input,
            rp: relyingPartyOf(ctx.web.selfOrigin),
          })) as unknown as Record<string, unknown> | null,
      ),
    ),
});
