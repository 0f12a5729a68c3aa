import {
  decideProposalInputSchema,
  IdemError,
  listProposalsInputSchema,
  proposalPageSchema,
  proposalViewSchema,
  proposeInputSchema,
  proposeOutputSchema,
  type ResolveWithdrawalProposal,
} from '@idem/contracts';
import {
  cancelProposal,
  decideProposal,
  expiryRefusal,
  findProposal,
  getOperation,
  listProposals,
  proposalsAwaiting,
  propose,
  relyingPartyOf,
  type SettlementAttestation,
  type Tx,
  toProposalView,
} from '@idem/core';
import { z } from 'zod';
import { staffWith, staffWithFresh } from '../auth/procedures.ts';
import { noRailWitness, type SettlementWitness } from '../settlement-witness.ts';
import { router } from '../trpc.ts';

const proposalIdInputSchema = z.strictObject({ proposalId: z.uuid() });
const decideProposalOutputSchema = z.object({
  proposal: proposalViewSchema,
  approvalsGiven: z.number().int(),
  approvalsRequired: z.number().int(),
});

/**
 * Proposals (four eyes for every manual money path): an operator proposes, another staff member
 * with the decide permission approves, bound to the hash of the payload and evidence shown. For a
 * resolution the server asks the rail before proposing and again before the deciding approval.
 * A member with an active passkey decides with an assertion over that hash and the decision, made
 * for the deployment's origin (staffPasskeys.proposalOptions gives the browser its challenge).
 */
export const staffProposalsRouter = router({
  list: staffWith('read')
    .input(listProposalsInputSchema)
    .output(proposalPageSchema)
    .query(({ ctx, input }) => ctx.inTenant((tx) => listProposals(tx, ctx.tenantId, input))),

  /** What waits for the signed-in member's decision (the Overview lists it). */
  awaitingMe: staffWith('read')
    .output(z.array(proposalViewSchema))
    .query(({ ctx }) =>
      ctx.inTenant((tx) => proposalsAwaiting(tx, ctx.tenantId, { actor: ctx.actor, role: ctx.staff.role })),
    ),

  get: staffWith('read')
    .input(proposalIdInputSchema)
    .output(proposalViewSchema)
    .query(({ ctx, input }) =>
      ctx.inTenant(async (tx) => {
        const found = await findProposal(tx, ctx.tenantId, input.proposalId);
        if (!found) throw new IdemError('NOT_FOUND', 'no such proposal');
        return toProposalView(tx, found);
      }),
    ),

  propose: staffWith('operate')
    .input(proposeInputSchema)
    .output(proposeOutputSchema)
    .mutation(async ({ ctx, input }) => {
      const witness = ctx.witness ?? noRailWitness;
      // The rail is asked outside the transaction: no row is held while a node answers.
      const gathered =
        input.kind === 'resolve_withdrawal' ? await attestFor(ctx, input.payload, witness) : null;
      return ctx.inTenant(async (tx) => {
        const { outcome, proposal } = await propose(tx, {
          tenantId: ctx.tenantId,
          actor: ctx.actor,
          request: input,
          gathered,
        });
        return { outcome, proposal: await toProposalView(tx, proposal) };
      });
    }),

  decide: staffWithFresh('decide')
    .input(decideProposalInputSchema)
    .output(decideProposalOutputSchema)
    .mutation(async ({ ctx, input }) => {
      const witness = ctx.witness ?? noRailWitness;
      const current = await ctx.inTenant((tx) => findProposal(tx, ctx.tenantId, input.proposalId));
      if (!current) throw new IdemError('NOT_FOUND', 'no such proposal');
      const attestation =
        current.kind === 'resolve_withdrawal' && input.decision === 'approve'
          ? await attestFor(ctx, current.payload as ResolveWithdrawalProposal, witness)
          : undefined;
      // An expired proposal is marked EXPIRED in this transaction, which commits; the decision is
      // recorded and answered as EXPIRED.
      const decided = await ctx.inTenant(
        async (tx) => {
          const result = await decideProposal(tx, {
            tenantId: ctx.tenantId,
            proposalId: input.proposalId,
            staffId: ctx.actor,
            payloadHash: input.payloadHash,
            decision: input.decision,
            reason: input.reason,
            attestation,
            // With an active passkey the decider signs this proposal's hash and the decision (I32-TRUST).
            assertion: input.assertion,
            relyingParty: relyingPartyOf(ctx.web.selfOrigin),
          });
          return {
            ...result,
            view: await toProposalView(tx, result.proposal),
          };
        },
        { refusalOf: expiryRefusal },
      );
      return {
        proposal: decided.view,
        approvalsGiven: decided.approvalsGiven,
        approvalsRequired: decided.approvalsRequired,
      };
    }),

  cancel: staffWithFresh('operate')
    .input(proposalIdInputSchema)
    .output(proposalViewSchema)
    .mutation(({ ctx, input }) =>
      ctx.inTenant(async (tx) =>
        toProposalView(
          tx,
          await cancelProposal(tx, {
            tenantId: ctx.tenantId,
            proposalId: input.proposalId,
            actor: ctx.actor,
          }),
        ),
      ),
    ),
});

async function attestFor(
  ctx: { tenantId: string; inTenant: <T>(work: (tx: Tx) => Promise<T>) => Promise<T> },
  payload: ResolveWithdrawalProposal,
  witness: SettlementWitness,
): Promise<SettlementAttestation> {
  const op = await ctx.inTenant((tx) => getOperation(tx, ctx.tenantId, payload.operationId));
  return witness.attest(op, { toState: payload.toState, txHash: payload.txHash });
}
