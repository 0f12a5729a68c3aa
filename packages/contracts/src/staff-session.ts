import { z } from 'zod';
import { staffRoleSchema } from './staff-roles.ts';

/** Staff sign-in and the session it opens: organisation, credentials, TOTP state, who is signed in. */

const uuid = z.uuid();

/**
 * An organisation's slug: what staff type at sign-in instead of a tenant id. Lower case
 * letters, digits and inner hyphens; compared case-insensitively.
 */
export const organisationSlugSchema = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?$/, {
    error: 'organisation: 1..48 of a-z, 0-9 and inner hyphens',
  });

/**
 * Staff sign-in: e-mail and password, and the organisation's slug, or nothing when the e-mail
 * belongs to one organisation only. `tenantId` is still accepted in place of the slug (older links
 * `/staff/login?tenant=<id>` and scripts).
 */
export const staffSignInInputSchema = z.strictObject({
  organisation: organisationSlugSchema.optional(),
  tenantId: uuid.optional(),
  email: z.string().trim().min(3).max(254),
  password: z.string().min(1).max(1024),
});

/**
 * Where the session stands with TOTP: `off` (not required, not enrolled), `enrol` (required and not
 * enrolled: only enrolment is allowed), `verify` (enrolled, no code yet in this session), `ok`
 * (a code verified; `freshUntil` is when step-up will ask again).
 */
export const staffMfaStatusSchema = z.object({
  state: z.enum(['off', 'enrol', 'verify', 'ok']),
  freshUntil: z.string().nullable(),
});
export type StaffMfaStatus = z.infer<typeof staffMfaStatusSchema>;

export const staffMeSchema = z.object({
  userId: uuid,
  tenantId: uuid,
  email: z.string(),
  role: staffRoleSchema,
  /** Sent back in the `x-csrf-token` header on every mutation of this session. */
  csrfToken: z.string(),
  expiresAt: z.string(),
  mfa: staffMfaStatusSchema,
});
export type StaffMe = z.infer<typeof staffMeSchema>;
