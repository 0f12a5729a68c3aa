import { z } from 'zod';
import { controlChangeOutcomeSchema } from './governance.ts';
import { payloadHashSchema } from './operation.ts';

/**
 * Staff passkeys (WebAuthn, docs/GOVERNANCE.md "Passkeys"): a member registers one from the
 * Passkeys screen; it is stored inactive and becomes usable only through a `passkey_register`
 * control change another admin approves (the tenant's first admin's first passkey in single-admin
 * mode is the trust anchor, active at once). An approver with an active passkey decides a
 * withdrawal only with an assertion whose challenge is bound to the withdrawal's payload hash and
 * the decision (approvalChallenge in @idem/core), and a proposal the same way (proposalChallenge).
 */

const base64url = z
  .string()
  .min(1)
  .max(16_384)
  .regex(/^[A-Za-z0-9_-]+$/, 'base64url');

/** A credential id as the browser answers it (base64url, at most 1023 bytes by WebAuthn). */
export const passkeyCredentialIdSchema = base64url.max(1400);

/** What `navigator.credentials.get` answered, as @simplewebauthn/browser encodes it. */
export const passkeyAssertionSchema = z.strictObject({
  id: passkeyCredentialIdSchema,
  rawId: passkeyCredentialIdSchema,
  type: z.literal('public-key'),
  response: z.strictObject({
    clientDataJSON: base64url,
    authenticatorData: base64url,
    signature: base64url,
    userHandle: base64url.optional(),
  }),
  clientExtensionResults: z.record(z.string(), z.unknown()),
  authenticatorAttachment: z.enum(['platform', 'cross-platform']).optional(),
});
export type PasskeyAssertion = z.infer<typeof passkeyAssertionSchema>;

/** What `navigator.credentials.create` answered, as @simplewebauthn/browser encodes it. */
export const passkeyRegistrationSchema = z.strictObject({
  id: passkeyCredentialIdSchema,
  rawId: passkeyCredentialIdSchema,
  type: z.literal('public-key'),
  response: z.looseObject({
    clientDataJSON: base64url,
    attestationObject: base64url,
    transports: z.array(z.string().max(32)).max(10).optional(),
  }),
  clientExtensionResults: z.record(z.string(), z.unknown()),
  authenticatorAttachment: z.enum(['platform', 'cross-platform']).optional(),
});
export type PasskeyRegistration = z.infer<typeof passkeyRegistrationSchema>;

export const registerPasskeyInputSchema = z.strictObject({
  label: z.string().trim().min(1).max(80),
  registration: passkeyRegistrationSchema,
});

export const passkeyViewSchema = z.object({
  credentialId: z.string(),
  label: z.string(),
  createdAt: z.string(),
  /** Null while its control change waits for another admin. */
  activatedAt: z.string().nullable(),
  revokedAt: z.string().nullable(),
});
export type PasskeyView = z.infer<typeof passkeyViewSchema>;

export const registerPasskeyOutputSchema = controlChangeOutcomeSchema.extend({
  passkey: passkeyViewSchema,
});

/** The options the browser passes to `startAuthentication` to decide one withdrawal. */
export const approvalPasskeyInputSchema = z.strictObject({
  operationId: z.uuid(),
  payloadHash: payloadHashSchema,
  decision: z.enum(['approve', 'reject']),
});

/** The options the browser passes to `startAuthentication` to decide one proposal. */
export const proposalPasskeyInputSchema = z.strictObject({
  proposalId: z.uuid(),
  payloadHash: payloadHashSchema,
  decision: z.enum(['approve', 'reject']),
});
