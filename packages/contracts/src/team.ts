import { z } from 'zod';
import { staffRoleSchema } from './staff-roles.ts';

/**
 * Shapes of staff MFA (TOTP, RFC 6238) and of the Team screen, shared by the server's
 * `.input()`/`.output()` and the web app.
 */

const totpCode = z.string().regex(/^\d{6}$/, { error: 'the code has 6 digits' });
/** Recovery codes are shown as `xxxxx-xxxxx` (base32 letters and digits); spaces and case are ignored. */
const recoveryCode = z
  .string()
  .trim()
  .min(10)
  .max(40)
  .transform((code) => code.replace(/[\s-]/g, '').toLowerCase());

/** What enrolment shows once: the secret, its otpauth URL and that URL as a QR code image. */
export const mfaEnrolmentSchema = z.object({
  secret: z.string(),
  otpauthUrl: z.string(),
  /** `data:image/png;base64,...`: the CSP allows `img-src data:`. */
  qrDataUrl: z.string(),
});

export const mfaCodeInputSchema = z.strictObject({ code: totpCode });

/** The ten one-time recovery codes, shown once; only their hashes are kept. */
export const mfaRecoveryCodesSchema = z.object({ recoveryCodes: z.array(z.string()).length(10) });

/** A code from the authenticator, or one of the recovery codes. */
export const mfaVerifyInputSchema = z.union([
  z.strictObject({ code: totpCode }),
  z.strictObject({ recoveryCode }),
]);
export const mfaVerifiedSchema = z.object({ freshUntil: z.string() });

export const teamMemberSchema = z.object({
  userId: z.uuid(),
  email: z.string(),
  role: staffRoleSchema,
  /** `invited`: no password yet (the invitation link sets one). */
  status: z.enum(['active', 'invited', 'disabled']),
  mfaEnrolled: z.boolean(),
  createdAt: z.string(),
  /** While the member cools off (new, or role changed): when their approvals start to count. */
  approvalsFrom: z.string().nullable(),
});
export type TeamMember = z.infer<typeof teamMemberSchema>;
export const teamListSchema = z.object({ staff: z.array(teamMemberSchema) });

export const teamInviteInputSchema = z.strictObject({
  email: z.email().max(254),
  role: staffRoleSchema,
});
/**
 * What the inviting admin learns. In quorum mode the invitation is a control change (PROPOSED: other
 * admins approve it, it is sent after the tenant's delay; member and expiry are null until then); a
 * lone admin's invitation is sent at once (APPLIED: who was invited and until when the link works).
 * The link itself goes only to the invitee's e-mail, so the admin cannot accept it in their place.
 */
export const teamInvitationSchema = z.object({
  outcome: z.enum(['APPLIED', 'PROPOSED']),
  proposalId: z.uuid().nullable(),
  approvalsRequired: z.number().int().nullable(),
  userId: z.uuid().nullable(),
  email: z.string(),
  expiresAt: z.string().nullable(),
});
export const teamSetRoleInputSchema = z.strictObject({ userId: z.uuid(), role: staffRoleSchema });
export const teamMemberInputSchema = z.strictObject({ userId: z.uuid() });

/** The invited person's first sign-in: the link's token (from its fragment) and a new password. */
export const acceptInvitationInputSchema = z.strictObject({
  token: z.string().min(10).max(200),
  password: z.string().min(12).max(1024),
});
