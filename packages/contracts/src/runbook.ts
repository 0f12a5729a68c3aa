import { z } from 'zod';
import { amountMinorSchema } from './amount.ts';
import { assetCodeSchema } from './asset-code.ts';
import { referenceSchema } from './key.ts';
import { memoSchema } from './operation.ts';

/** What staff do to a withdrawal by hand: own it, stop it before signing, make one for an account. */

const uuid = z.uuid();

/** Evidence a runbook action records in the operation's history. */
export const runbookEvidenceSchema = z.strictObject({
  summary: z.string().trim().min(10, { error: 'say what was checked, in at least 10 characters' }).max(2000),
  txHash: z.string().trim().max(200).optional(),
  custodianRecord: z.string().trim().max(500).optional(),
});

export const assignOwnerInputSchema = z.strictObject({
  operationId: uuid,
  owner: z.string().trim().min(1).max(100),
  reason: z.string().trim().min(3).max(500),
});

/**
 * Stop before signing: an APPROVED withdrawal no worker has leased goes to REJECTED
 * (code STOPPED_BY_STAFF) and its hold is released. The reason is recorded in the history.
 */
export const stopWithdrawalInputSchema = z.strictObject({
  operationId: uuid,
  reason: z.string().trim().min(10).max(500),
});

// Manual resolution is a proposal (proposals.ts, kind resolve_withdrawal), approved by another person.

/**
 * A withdrawal a staff member makes for an account. `onBehalfOf` names the account holder's own
 * request it carries out (a ticket, a recorded call): then one other staff member must approve it;
 * without it the staff member acts on their own and two others must approve (I11-F3).
 */
export const staffWithdrawInputSchema = z.strictObject({
  intentId: uuid,
  accountId: referenceSchema,
  asset: assetCodeSchema,
  destination: z.string().trim().min(1).max(128),
  memo: memoSchema.optional(),
  amountMinor: amountMinorSchema,
  onBehalfOf: z.strictObject({ customerRequestRef: z.string().trim().min(3).max(200) }).optional(),
});
