import { batchingOf, type Database } from '../db/connect.ts';
import { createPrepared } from './batched-creation.ts';
import type { IdentityClaim } from './claim-identity.ts';
import type { PreparedSubmission } from './prepare-withdrawal.ts';
import { SubmissionBatcher } from './withdrawal-batcher.ts';

const batchers = new WeakMap<Database, SubmissionBatcher<PreparedSubmission, IdentityClaim> | null>();

/** What the gatherer reports of each batch it sent: its size (1: a submission sent alone) and time. */
export type BatchObserver = (items: number, seconds: number) => void;

const observers = new WeakMap<Database, Set<BatchObserver>>();

/**
 * Calls `observer` for each batch of gathered submissions on this database once it is answered
 * (the server's metrics: an operator tuning IDEM_BATCH_* sees the sizes that come of it), for the
 * database's life. The bulk API's calls are not gathered and not reported.
 */
export function observeBatches(db: Database, observer: BatchObserver): void {
  const set = observers.get(db) ?? new Set<BatchObserver>();
  set.add(observer);
  observers.set(db, set);
}

/** The database's submission batcher, made on first use from its `openDatabase` settings. */
export function batcherOf(db: Database): SubmissionBatcher<PreparedSubmission, IdentityClaim> | null {
  let batcher = batchers.get(db);
  if (batcher === undefined) {
    const settings = batchingOf(db);
    batcher =
      settings === false
        ? null
        : new SubmissionBatcher<PreparedSubmission, IdentityClaim>(
            settings,
            (submission) => `${submission.tenantId}/${submission.actor}`,
            (submissions) => createPrepared(db, submissions),
            (items, seconds) => {
              for (const observer of observers.get(db) ?? []) observer(items, seconds);
            },
          );
    batchers.set(db, batcher);
  }
  return batcher;
}
