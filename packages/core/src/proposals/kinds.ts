import type { Permission, ProposalKind } from '@idem/contracts';
import type { z } from 'zod';
import type { Tx } from '../db/connect.ts';
import { adjustmentRule } from './kinds/adjustment.ts';
import { controlChangeRule } from './kinds/control-change.ts';
import { manualCreditRule } from './kinds/manual-credit.ts';
import { resolveWithdrawalRule } from './kinds/resolve-withdrawal.ts';
import { cancelWithdrawalRule, raiseFeeCapRule } from './kinds/stuck-withdrawal.ts';
import type { ProposalRecord } from './record.ts';

/** What a kind's rule learns about the proposal being made. */
export interface PrepareContext<P> {
  tenantId: string;
  payload: P;
  /** Evidence the system gathered outside the database (a rail's answer), or null. */
  gathered: Record<string, unknown> | null;
}

/** What a kind's rule learns when the last approval arrives. */
export interface ExecuteContext<P> {
  proposal: ProposalRecord;
  payload: P;
  /** The distinct approvers, in order; never the proposer. */
  approvers: string[];
  /** A fresh answer from the authoritative source, gathered just before this decision (if any). */
  attestation: unknown;
}

/**
 * One kind of proposal: how its payload is checked, what it binds as evidence, how many people
 * must approve it, and what it does once approved (inside the deciding transaction).
 */
export interface ProposalRule<P> {
  schema: z.ZodType<P>;
  /**
   * Checks the proposal can make sense now and returns what the approvers are shown beyond the
   * payload: the operation it targets and the evidence bound into the hash.
   */
  prepare(
    tx: Tx,
    ctx: PrepareContext<P>,
  ): Promise<{ targetOperationId: string | null; evidence: Record<string, unknown> | null }>;
  /** Distinct approvers needed besides the proposer, fixed when the proposal is made. */
  approvalsRequired(tx: Tx, ctx: PrepareContext<P>): Promise<number>;
  /**
   * The permission an approver must hold, when deciding and still when it executes: an approval by
   * a member since disabled or moved to a role without it does not count.
   */
  approverPermission: Permission;
  /**
   * A control change: the last approval makes it APPROVED, and it is applied (`execute`) only after
   * the tenant's delay, by the governance executor (./control.ts).
   */
  delayed?: boolean;
  /** Runs the approved action; returns what it produced (recorded as the proposal's result). */
  execute(tx: Tx, ctx: ExecuteContext<P>): Promise<Record<string, unknown>>;
}

// biome-ignore lint/suspicious/noExplicitAny: each rule is typed by its own payload; the map is keyed by kind.
export const PROPOSAL_RULES: Record<ProposalKind, ProposalRule<any>> = {
  adjustment: adjustmentRule,
  manual_credit: manualCreditRule,
  resolve_withdrawal: resolveWithdrawalRule,
  cancel_withdrawal: cancelWithdrawalRule,
  raise_fee_cap: raiseFeeCapRule,
  control_change: controlChangeRule,
};
