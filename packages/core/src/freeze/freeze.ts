import { randomUUID } from 'node:crypto';
import {
  type ControlChangeOutcome,
  type FreezeInput,
  type FreezesView,
  type FreezeView,
  freezeInputSchema,
  type HeldWithdrawalView,
  IdemError,
} from '@idem/contracts';
import { and, desc, eq, inArray, isNull, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';
import { assets, freezes, proposals } from '../db/schema/index.ts';
import { parseOrThrow } from '../operations/input-validation.ts';
import { activeMembers, counts } from '../proposals/approvers.ts';
import { proposeControlChange } from '../proposals/control.ts';
import { freezeCoversWhere } from './hold.ts';

/**
 * The freeze switch (docs/GOVERNANCE.md "Freeze"). Freezing is a tightening, so one member with
 * `operate` freezes at once (the staff procedure audits it). Lifting is a loosening: a
 * `freeze_lift` control change other admins approve, applied by the governance step after the
 * tenant's delay (../proposals/kinds/control-change.ts); the database refuses any other lift and
 * every deletion (core/sql/idem_guard_freeze_write.sql). While a freeze is in force the claim for
 * signing takes nothing under it (./hold.ts): its withdrawals stay where they are, shown as held.
 */

type FreezeRow = typeof freezes.$inferSelect;

/** Withdrawals not yet sent that a freeze can hold: under review, approved, signed and unsent. */
const HOLDABLE_STATES = ['REQUESTED', 'APPROVED', 'SIGNING', 'SIGNED'] as const;

/**
 * Freezes a tenant, one of its assets or one of its accounts, at once. The same freeze already in
 * force is answered as it stands (a second click freezes nothing twice).
 */
export async function freeze(
  tx: Tx,
  input: { tenantId: string; actor: string; request: FreezeInput },
): Promise<FreezeView> {
  const request = parseOrThrow(freezeInputSchema, input.request);
  // Checked here too, not only by the server: a freeze names who had the right to make it.
  if (!counts(await activeMembers(tx, input.tenantId), input.actor, 'operate')) {
    throw new IdemError('FORBIDDEN', 'only an active member with the operate permission freezes');
  }
  return recordFreeze(tx, input.tenantId, input.actor, request);
}

/**
 * Freezes as the deployment's operator (`idem freeze`): whoever runs the CLI against the database
 * is not a member of the tenant's staff, and needs no member to stop everything in an incident.
 * The actor is recorded as `cli:<who>`, so a freeze always says whether staff or the deployment
 * made it. Lifting stays a staff control change.
 */
/** The operator names `freezeAsOperator` records (`cli:<name>`); the CLI audits any other as unnamed. */
export const OPERATOR_NAME = /^[A-Za-z0-9._@-]{1,64}$/;

export async function freezeAsOperator(
  tx: Tx,
  input: { tenantId: string; operator: string; request: FreezeInput },
): Promise<FreezeView> {
  const request = parseOrThrow(freezeInputSchema, input.request);
  if (!OPERATOR_NAME.test(input.operator)) {
    throw new IdemError('VALIDATION', 'the operator is 1..64 of letters, digits and . _ @ -');
  }
  return recordFreeze(tx, input.tenantId, `cli:${input.operator}`, request);
}

async function recordFreeze(
  tx: Tx,
  tenantId: string,
  actor: string,
  request: FreezeInput,
): Promise<FreezeView> {
  const input = { tenantId, actor };
  if (request.scope === 'asset') {
    const [asset] = await tx
      .select({ code: assets.code })
      .from(assets)
      .where(and(eq(assets.tenantId, input.tenantId), eq(assets.code, request.assetCode)));
    if (!asset) throw new IdemError('VALIDATION', `the tenant has no asset ${request.assetCode}`);
  }
  const assetCode = request.scope === 'asset' ? request.assetCode : null;
  const accountRef = request.scope === 'account' ? request.accountRef : null;
  const [existing] = await tx
    .select()
    .from(freezes)
    .where(
      and(
        eq(freezes.tenantId, input.tenantId),
        eq(freezes.scope, request.scope),
        isNull(freezes.liftedAt),
        assetCode === null ? isNull(freezes.assetCode) : eq(freezes.assetCode, assetCode),
        accountRef === null ? isNull(freezes.accountRef) : eq(freezes.accountRef, accountRef),
      ),
    );
  if (existing) return view(existing, null);
  const [created] = await tx
    .insert(freezes)
    .values({
      tenantId: input.tenantId,
      freezeId: randomUUID(),
      scope: request.scope,
      assetCode,
      accountRef,
      reason: request.reason,
      frozenBy: input.actor,
    })
    .returning();
  if (!created) throw new Error('freeze insert returned no row');
  return view(created, null);
}

/**
 * Proposes lifting a freeze in force: an active admin proposes, other admins approve (the tenant's
 * quorum), and it applies after the tenant's delay. A tenant with one admin lifts nothing: the
 * control change refuses it (FORBIDDEN), and the freeze stays.
 */
export async function proposeUnfreeze(
  tx: Tx,
  input: { tenantId: string; actor: string; freezeId: string },
): Promise<ControlChangeOutcome> {
  await freezeInForce(tx, input.tenantId, input.freezeId);
  // One open lift per freeze: asked again, the lift already waiting is answered.
  const [open] = await tx
    .select({ proposalId: proposals.proposalId, approvalsRequired: proposals.approvalsRequired })
    .from(proposals)
    .where(
      and(
        eq(proposals.tenantId, input.tenantId),
        eq(proposals.kind, 'control_change'),
        inArray(proposals.state, ['PENDING', 'APPROVED']),
        sql`${proposals.payload} -> 'change' ->> 'control' = 'freeze_lift'`,
        sql`${proposals.payload} -> 'change' ->> 'freezeId' = ${input.freezeId}`,
      ),
    );
  const proposal =
    open ??
    (
      await proposeControlChange(tx, {
        tenantId: input.tenantId,
        actor: input.actor,
        change: { control: 'freeze_lift', freezeId: input.freezeId },
      })
    ).proposal;
  return {
    outcome: 'PROPOSED',
    proposalId: proposal.proposalId,
    approvalsRequired: proposal.approvalsRequired,
  };
}

/** The freeze as the approvers of its lift are shown it; NOT_FOUND when none is in force. */
export async function freezeInForce(tx: Tx, tenantId: string, freezeId: string): Promise<FreezeView> {
  const [row] = await tx
    .select()
    .from(freezes)
    .where(and(eq(freezes.tenantId, tenantId), eq(freezes.freezeId, freezeId), isNull(freezes.liftedAt)));
  if (!row) throw new IdemError('NOT_FOUND', 'no freeze in force with that id');
  return view(row, null);
}

/**
 * The apply step of an approved, due `freeze_lift` control change: records the lift (the database
 * lets the application role do this only now). The freeze row stays, as history.
 */
export async function liftFreeze(
  tx: Tx,
  input: { tenantId: string; freezeId: string; proposalId: string; actor: string },
): Promise<{ freezeId: string; lifted: true }> {
  await freezeInForce(tx, input.tenantId, input.freezeId);
  const lifted = await tx
    .update(freezes)
    .set({ liftedAt: sql`now()`, liftedBy: input.actor, liftProposalId: input.proposalId })
    .where(
      and(
        eq(freezes.tenantId, input.tenantId),
        eq(freezes.freezeId, input.freezeId),
        isNull(freezes.liftedAt),
      ),
    )
    .returning({ freezeId: freezes.freezeId });
  if (lifted.length !== 1) throw new IdemError('NOT_FOUND', 'no freeze in force with that id');
  return { freezeId: input.freezeId, lifted: true };
}

/**
 * Every freeze of the tenant, in force first then newest first, each with the lift proposal
 * waiting for it, and the withdrawals not yet sent that the freezes in force hold.
 */
export async function listFreezes(tx: Tx, tenantId: string): Promise<FreezesView> {
  const rows = await tx
    .select()
    .from(freezes)
    .where(eq(freezes.tenantId, tenantId))
    .orderBy(sql`${freezes.liftedAt} is not null`, desc(freezes.frozenAt))
    .limit(200);
  const waiting = await tx
    .select({ proposalId: proposals.proposalId, payload: proposals.payload })
    .from(proposals)
    .where(
      and(
        eq(proposals.tenantId, tenantId),
        eq(proposals.kind, 'control_change'),
        inArray(proposals.state, ['PENDING', 'APPROVED']),
        sql`${proposals.payload} -> 'change' ->> 'control' = 'freeze_lift'`,
      ),
    );
  const liftFor = new Map<string, string>();
  for (const proposal of waiting) {
    const change = (proposal.payload as { change?: { freezeId?: string } }).change;
    if (change?.freezeId) liftFor.set(change.freezeId, proposal.proposalId);
  }
  return {
    freezes: rows.map((row) => view(row, row.liftedAt ? null : (liftFor.get(row.freezeId) ?? null))),
    held: await heldWithdrawals(tx, tenantId),
  };
}

/** The withdrawals not yet sent under a freeze in force, oldest first, with the freezes holding each. */
export async function heldWithdrawals(tx: Tx, tenantId: string): Promise<HeldWithdrawalView[]> {
  const rows = rowsOf<{
    operation_id: string;
    account_ref: string;
    asset_code: string;
    amount_minor: string;
    state: string;
    created_at: Date | string;
    held_by: string[];
  }>(
    await tx.execute(sql`
      select o.operation_id, o.account_ref, o.asset_code, o.amount_minor::text as amount_minor, o.state,
             o.created_at, array_agg(f.freeze_id::text order by f.frozen_at) as held_by
        from operations o
        join freezes f
          on ${freezeCoversWhere({ tenantId: sql`o.tenant_id`, assetCode: sql`o.asset_code`, accountRef: sql`o.account_ref` })}
       where o.tenant_id = ${tenantId}::uuid and o.kind = 'withdrawal'
         and o.state in (${sql.join(
           HOLDABLE_STATES.map((state) => sql`${state}`),
           sql`, `,
         )})
       group by o.operation_id, o.account_ref, o.asset_code, o.amount_minor, o.state, o.created_at
       order by o.created_at
       limit 200`),
  );
  return rows.map((row) => ({
    operationId: row.operation_id,
    accountRef: row.account_ref,
    assetCode: row.asset_code,
    amountMinor: row.amount_minor,
    state: row.state,
    createdAt: new Date(row.created_at).toISOString(),
    heldBy: row.held_by,
  }));
}

function view(row: FreezeRow, pendingLiftProposalId: string | null): FreezeView {
  return {
    freezeId: row.freezeId,
    scope: row.scope as FreezeView['scope'],
    assetCode: row.assetCode,
    accountRef: row.accountRef,
    reason: row.reason,
    frozenBy: row.frozenBy,
    frozenAt: row.frozenAt.toISOString(),
    liftedAt: row.liftedAt?.toISOString() ?? null,
    liftedBy: row.liftedBy,
    liftProposalId: row.liftProposalId,
    pendingLiftProposalId,
  };
}
