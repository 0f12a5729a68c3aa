import {
  assignOwnerInputSchema,
  attentionQueueInputSchema,
  attentionQueuePageSchema,
  bumpFeeInputSchema,
  decideInputSchema,
  decideOutputSchema,
  IdemError,
  operationAttemptsSchema,
  operationIdInputSchema,
  pageInputSchema,
  searchInputSchema,
  staffOperationDetailSchema,
  staffOperationPageSchema,
  staffOperationViewSchema,
  staffWithdrawInputSchema,
  stopWithdrawalInputSchema,
  walletNoncesSchema,
  withdrawOutputSchema,
} from '@idem/contracts';
import {
  decideWithdrawal,
  escalateOperation,
  findOperation,
  listApprovalQueue,
  listAttentionQueue,
  listHotWallets,
  operationAttempts,
  operationTimeline,
  relyingPartyOf,
  requestFeeBump,
  searchOperations,
  stopWithdrawal,
  submitWebWithdrawal,
  toStaffView,
  toView,
  walletNonceView,
} from '@idem/core';
import { z } from 'zod';
import { staffWith, staffWithFresh } from '../auth/procedures.ts';
import { router } from '../trpc.ts';

/** The staff screens' operation procedures. Every action records its actor as `staff:<user id>`. */
export const staffOperationsRouter = router({
  approvals: staffWith('read')
    .input(pageInputSchema)
    .output(staffOperationPageSchema)
    .query(({ ctx, input }) =>
      ctx.inTenant((tx) => listApprovalQueue(tx, ctx.tenantId, { cursor: input.cursor, limit: input.limit })),
    ),

  /**
   * Four-eyes, bound to the hash the approver was shown; the requester is refused by core (C02,
   * C24). An approver with an active passkey sends its assertion over that hash and the decision,
   * made for the deployment's origin (I32-PASSKEY).
   */
  decide: staffWithFresh('decide')
    .input(decideInputSchema)
    .output(decideOutputSchema)
    .mutation(async ({ ctx, input }) => {
      const result = await ctx.inTenant((tx) =>
        decideWithdrawal(tx, {
          tenantId: ctx.tenantId,
          operationId: input.operationId,
          staffId: ctx.actor,
          payloadHash: input.payloadHash,
          decision: input.decision,
          ...(input.reason ? { reason: input.reason } : {}),
          // With an active passkey the approver signs this payload hash on their device (I32-PASSKEY).
          ...(input.assertion ? { assertion: input.assertion } : {}),
          relyingParty: relyingPartyOf(ctx.web.selfOrigin),
        }),
      );
      return {
        state: result.operation.state,
        approvalsGiven: result.approvalsGiven,
        approvalsRequired: result.approvalsRequired,
      };
    }),

  /** BROADCAST, UNKNOWN or FAILED_TERMINAL withdrawals, oldest in their state first, with that age. */
  queue: staffWith('read')
    .input(attentionQueueInputSchema)
    .output(attentionQueuePageSchema)
    .query(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        listAttentionQueue(tx, ctx.tenantId, {
          state: input.state,
          cursor: input.cursor,
          limit: input.limit,
          ...(ctx.broadcastAlertAfterMs ? { alertAfterMs: ctx.broadcastAlertAfterMs } : {}),
        }),
      ),
    ),

  /** Escalate: name the owner. Records the previous owner as evidence. */
  escalate: staffWith('operate')
    .input(assignOwnerInputSchema)
    .output(staffOperationViewSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant(async (tx) =>
        toStaffView(tx, await escalateOperation(tx, { tenantId: ctx.tenantId, ...input, actor: ctx.actor })),
      ),
    ),

  /**
   * Stop before signing: an APPROVED withdrawal no worker has leased goes to REJECTED
   * with its hold released, recorded with who and why. Stopping only lowers risk, so one person
   * with either the decide or the operate permission suffices (no four eyes). A leased one is
   * refused (INVALID_TRANSITION): core locks the row and requires APPROVED in the write.
   */
  stop: staffWithFresh('decide', 'operate')
    .input(stopWithdrawalInputSchema)
    .output(staffOperationViewSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant(async (tx) =>
        toStaffView(
          tx,
          await stopWithdrawal(tx, {
            tenantId: ctx.tenantId,
            operationId: input.operationId,
            actor: ctx.actor,
            reason: input.reason,
          }),
        ),
      ),
    ),

  // Resolving a stuck withdrawal is a four-eyes proposal with the rail's proof
  // (staffProposals.propose, kind resolve_withdrawal; I11-F4): no one person moves it.

  /** A chain withdrawal's signed attempts (original, fee bumps, cancel) with their fees and status. */
  attempts: staffWith('read')
    .input(operationIdInputSchema)
    .output(operationAttemptsSchema)
    .query(({ ctx, input }) => ctx.inTenant((tx) => operationAttempts(tx, ctx.tenantId, input.operationId))),

  /**
   * A fee bump within the approved fee cap: the operate permission suffices (it moves no more money
   * than was approved). The worker signs it on its next pass and records it before broadcasting;
   * above the cap it raises an alert, and a raise_fee_cap proposal (four eyes) is needed.
   */
  bumpFee: staffWith('operate')
    .input(bumpFeeInputSchema)
    .output(z.object({ requestId: z.uuid() }))
    .mutation(({ ctx, input }) =>
      ctx.inTenant((tx) =>
        requestFeeBump(tx, {
          tenantId: ctx.tenantId,
          operationId: input.operationId,
          actor: ctx.actor,
          reason: input.reason,
        }),
      ),
    ),

  /** Each hot wallet's nonces: the chain's counts beside our operations, and what blocks the queue. */
  nonces: staffWith('read')
    .output(z.array(walletNoncesSchema))
    .query(async ({ ctx }) => {
      // The node is asked outside the transaction: no row is held while it answers.
      const wallets = await ctx.inTenant((tx) => listHotWallets(tx, ctx.tenantId));
      const counts: Record<string, { latest: number; pending: number } | null> = {};
      for (const wallet of wallets) {
        counts[wallet.network] = ctx.witness?.readNonces
          ? await ctx.witness.readNonces(wallet.address, wallet.network).catch(() => null)
          : null;
      }
      return ctx.inTenant((tx) => walletNonceView(tx, ctx.tenantId, counts));
    }),

  get: staffWith('read')
    .input(operationIdInputSchema)
    .output(staffOperationDetailSchema)
    .query(({ ctx, input }) =>
      ctx.inTenant(async (tx) => {
        const op = await findOperation(tx, ctx.tenantId, input.operationId);
        if (!op) throw new IdemError('NOT_FOUND', 'no such operation');
        return {
          operation: await toStaffView(tx, op),
          timeline: await operationTimeline(tx, ctx.tenantId, op.operationId),
        };
      }),
    ),

  search: staffWith('read')
    .input(searchInputSchema)
    .output(staffOperationPageSchema)
    .query(({ ctx, input }) => ctx.inTenant((tx) => searchOperations(tx, ctx.tenantId, input.query))),

  /**
   * A manual withdrawal for an account, through the same creation, hold and review path (C24). The
   * review never approves it alone: one other staff member approves it when it is made at the
   * holder's request (`onBehalfOf`), two otherwise (I11-F3).
   */
  withdraw: staffWith('operate')
    .input(staffWithdrawInputSchema)
    .output(withdrawOutputSchema)
    .mutation(async ({ ctx, input }) => {
      const claim = await ctx.inTenant((tx) =>
        submitWebWithdrawal(tx, {
          tenantId: ctx.tenantId,
          accountRef: input.accountId,
          actor: ctx.actor,
          intentId: input.intentId,
          asset: input.asset,
          destination: input.destination,
          memo: input.memo,
          amountMinor: input.amountMinor,
          onBehalfOf: input.onBehalfOf,
        }),
      );
      return { outcome: claim.outcome, withdrawal: toView(claim.operation) };
    }),
});
