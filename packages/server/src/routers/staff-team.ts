import {
  controlChangeOutcomeSchema,
  IdemError,
  teamInvitationSchema,
  teamInviteInputSchema,
  teamListSchema,
  teamMemberInputSchema,
  teamSetRoleInputSchema,
} from '@idem/contracts';
import { changeStaffRole, disableStaff, enableStaff, listTeam, requestStaffInvite } from '@idem/core';
import { z } from 'zod';
import { staffWith, staffWithFresh } from '../auth/procedures.ts';
import { router } from '../trpc.ts';

/**
 * The Team screen (I14-TEAM), admins only. Every change needs a fresh code (step-up) and
 * is audited by the staff procedure's middleware (who, when, from where, and the input).
 */
export const staffTeamRouter = router({
  list: staffWith('administer')
    .output(teamListSchema)
    .query(async ({ ctx }) => {
      const staff = await ctx.inTenant((tx) => listTeam(tx, ctx.tenantId));
      return {
        staff: staff.map((member) => ({
          ...member,
          createdAt: member.createdAt.toISOString(),
          approvalsFrom: member.approvalsFrom?.toISOString() ?? null,
        })),
      };
    }),

  /**
   * Invites a member: their invitation link (72 hours, one use; only its hash is stored) goes to
   * their e-mail only. In quorum mode the invite is proposed to the other admins (PROPOSED) and
   * sent when the approved change applies, after the tenant's delay; a lone admin's is sent at once.
   * The answer never holds the link: the admin must not be able to accept it themselves.
   */
  invite: staffWithFresh('administer')
    .input(teamInviteInputSchema)
    .output(teamInvitationSchema)
    .mutation(async ({ ctx, input }) => {
      const linkOrigin = ctx.web.mailedLinkOrigin;
      if (!linkOrigin)
        throw new IdemError('FORBIDDEN', 'invitations need IDEM_PUBLIC_URL set: their links are built on it');
      const invited = await ctx.inTenant((tx) =>
        requestStaffInvite(tx, {
          tenantId: ctx.tenantId,
          email: input.email,
          role: input.role,
          createdBy: ctx.actor,
          linkOrigin,
        }),
      );
      return { ...invited, expiresAt: invited.expiresAt?.toISOString() ?? null };
    }),

  /**
   * A role that takes permissions away applies at once (refused, FORBIDDEN, when it would demote the
   * tenant's last active admin); one that gives any is proposed to the other admins (PROPOSED).
   */
  setRole: staffWithFresh('administer')
    .input(teamSetRoleInputSchema)
    .output(controlChangeOutcomeSchema.extend({ changed: z.boolean() }))
    .mutation(async ({ ctx, input }) => {
      const outcome = await ctx.inTenant((tx) =>
        changeStaffRole(tx, { tenantId: ctx.tenantId, ...input, actor: ctx.actor }),
      );
      return { ...outcome, changed: outcome.outcome === 'APPLIED' };
    }),

  /** Re-enabling a disabled member is proposed to the other admins. */
  enable: staffWithFresh('administer')
    .input(teamMemberInputSchema)
    .output(controlChangeOutcomeSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        enableStaff(tx, { tenantId: ctx.tenantId, userId: input.userId, actor: ctx.actor }),
      ),
    ),

  /** Ends the member's sessions at once. An admin cannot disable themselves (FORBIDDEN). */
  disable: staffWithFresh('administer')
    .input(teamMemberInputSchema)
    .output(z.object({ disabled: z.literal(true) }))
    .mutation(async ({ ctx, input }) => {
      await ctx.inTenant((tx) =>
        disableStaff(tx, { tenantId: ctx.tenantId, userId: input.userId, actorUserId: ctx.staff.userId }),
      );
      return { disabled: true as const };
    }),
});
