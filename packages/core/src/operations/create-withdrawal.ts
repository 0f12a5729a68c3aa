import type { Database, Tx } from '../db/connect.ts';
import { batcherOf } from './batcher-registry.ts';
import type { IdentityClaim } from './claim-identity.ts';
import {
  parseInput,
  prepareSubmission,
  prepareWithdrawal,
  type WithdrawalSubmissionInput,
} from './prepare-withdrawal.ts';
import { answerForRow, callCreate, submitAlone } from './single-creation.ts';
import { readWithdrawalContext } from './withdrawal-context.ts';

/**
 * Points of creation where a fault-injection probe may run: after validation (nothing written
 * yet) and after every write (nothing committed yet). Tests kill a real process there (C10).
 */
export type CreationStep = 'validated' | 'written';

export interface CreateWithdrawalInput extends WithdrawalSubmissionInput {
  probe?: (step: CreationStep) => Promise<void>;
}

/**
 * Creates a withdrawal operation, or replays the one this key already created, in the caller's
 * tenant transaction. Validation and the payload hash happen here; the writes are one statement,
 * `idem_create_withdrawal` (core/sql/idem_create_withdrawal.sql): claim the identity (C01, C03, C04),
 * write the history row, the journal entry and the work items, and place the hold last (its
 * postings, which the database applies to the balance by a conditional UPDATE, C08), all in this
 * transaction (C10). Insufficient funds is stored as a REJECTED operation so that a replay returns
 * the same answer. Invalid input writes nothing.
 */
export async function createWithdrawal(tx: Tx, input: CreateWithdrawalInput): Promise<IdentityClaim> {
  const { request, idempotencyKey } = parseInput(input);
  const context = await readWithdrawalContext(tx, input.tenantId, request.asset);
  const prepared = prepareWithdrawal(input.tenantId, request, context);
  await input.probe?.('validated');
  const claim = answerForRow(
    await callCreate(tx, prepared, idempotencyKey, input.actor),
    prepared,
    idempotencyKey,
  );
  await input.probe?.('written');
  return claim;
}

/**
 * The same creation as its own transaction. By default it joins the database's submission batcher
 * (withdrawal-batcher.ts, batcher-registry.ts): under load, concurrent submissions of one tenant
 * are written by one statement, `idem_create_withdrawals` (batched-creation.ts), and each caller is
 * answered after the COMMIT that holds its item; alone, a submission goes out at once
 * (single-creation.ts). `openDatabase({ batching: false })` sends each alone.
 */
export async function submitWithdrawal(db: Database, input: WithdrawalSubmissionInput) {
  const prepared = await prepareSubmission(db, input);
  const batcher = batcherOf(db);
  return batcher ? batcher.submit(prepared) : submitAlone(db, prepared);
}
