import { IdemError } from '@idem/contracts';
import { and, desc, eq, inArray, ne, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { operations } from '../db/schema/index.ts';
import { HOLDING_STATES } from '../state-machine/transitions.ts';

/** What the second device is shown: the in-progress withdrawal the new one would repeat. */
export interface InProgressDuplicate {
  operationId: string;
  state: string;
  createdAt: string;
}

/**
 * Seed 004's phone-then-laptop case (I14-DEVICE). Each device mints its own intent id, so the
 * idempotency key cannot see that a laptop's withdrawal repeats the phone's. Before a customer's
 * withdrawal is created, this looks for one of the account's withdrawals still in progress (funds
 * held) with the same asset, destination and amount, and refuses with POSSIBLE_DUPLICATE naming the
 * newest such withdrawal unless the request confirms exactly that one. Nothing is merged (seed 000:
 * a second payment may be legitimate); the person decides with the first one in front of them.
 *
 * The account's transaction-scoped advisory lock serialises this check with the creation that
 * follows it in the same transaction, so two devices submitting at the same instant cannot both
 * pass unseen. The intent's own withdrawal id is excluded: a retry of one intent is a replay.
 * Destinations compare case-insensitively, so a checksummed and a lower-case EVM address match;
 * for case-sensitive formats that can only ask one confirmation too many, never one too few.
 */
export async function refuseUnconfirmedDuplicate(
  tx: Tx,
  input: {
    tenantId: string;
    accountRef: string;
    withdrawalId: string;
    asset: string;
    destination: string;
    amountMinor: string;
    confirmDuplicateOf?: string | undefined;
  },
): Promise<void> {
  await tx.execute(
    sql`select pg_advisory_xact_lock(hashtextextended(${`idem:customer-withdraw:${input.tenantId}:${input.accountRef}`}, 0))`,
  );
  const found = await tx
    .select({
      operationId: operations.operationId,
      state: operations.state,
      createdAt: operations.createdAt,
    })
    .from(operations)
    .where(
      and(
        eq(operations.tenantId, input.tenantId),
        eq(operations.accountRef, input.accountRef),
        eq(operations.kind, 'withdrawal'),
        inArray(operations.state, [...HOLDING_STATES]),
        eq(operations.assetCode, input.asset),
        eq(operations.amountMinor, input.amountMinor),
        sql`lower(${operations.destination}) = lower(${input.destination})`,
        ne(operations.reference, input.withdrawalId),
      ),
    )
    .orderBy(desc(operations.createdAt), desc(operations.operationId))
    .limit(1);
  const first = found[0];
  if (!first || first.operationId === input.confirmDuplicateOf) return;
  throw new IdemError(
    'POSSIBLE_DUPLICATE',
    'a withdrawal with the same asset, destination and amount is still in progress for this account; confirm to make another',
    {
      duplicateOf: {
        operationId: first.operationId,
        state: first.state,
        createdAt: first.createdAt.toISOString(),
      },
    },
  );
}
