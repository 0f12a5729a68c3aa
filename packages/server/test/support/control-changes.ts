import { applyDueControlChanges, type Database, withTenant } from '@idem/core';
import { expect } from 'vitest';
import { dataOf, type StaffHttp, type StaffSession } from './staff-http.ts';

interface ProposalView {
  proposalId: string;
  payloadHash: string;
  state: string;
  effectiveAt: string | null;
}

/**
 * Another admin approves a control change over HTTP, and the governance executor (the worker's
 * step, core's applyDueControlChanges) applies what is due, as the worker does every minute. The
 * tenant's loosening delay must have passed (tests set it to 0 or wait).
 */
export async function approveControlChange(
  call: StaffHttp['call'],
  approver: StaffSession,
  proposalId: string,
): Promise<ProposalView> {
  const proposal = dataOf<ProposalView>(
    await call('staffProposals.get', { session: approver, input: { proposalId } }),
  );
  const decided = dataOf<{ proposal: ProposalView }>(
    await call('staffProposals.decide', {
      mutation: true,
      session: approver,
      input: { proposalId, payloadHash: proposal.payloadHash, decision: 'approve' },
    }),
  );
  expect(decided.proposal.state).toBe('APPROVED');
  return decided.proposal;
}

/** Runs the governance executor once for the tenant, as the worker's periodic step does. */
export function applyDue(db: Database, tenantId: string) {
  return withTenant(db, tenantId, (tx) => applyDueControlChanges(tx, tenantId));
}

/** Approved by `approver` and applied at once: the tenant's delay must be 0. */
export async function approveAndApply(
  db: Database,
  tenantId: string,
  call: StaffHttp['call'],
  approver: StaffSession,
  proposalId: string,
): Promise<void> {
  await approveControlChange(call, approver, proposalId);
  const ran = await applyDue(db, tenantId);
  expect(ran.applied).toBeGreaterThanOrEqual(1);
}
