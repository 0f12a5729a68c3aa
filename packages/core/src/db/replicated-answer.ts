import { sql } from 'drizzle-orm';
import type { Tx } from './connect.ts';

/**
 * Makes the transaction's commit wait for the synchronous standby even though it wrote nothing, so
 * an answer read from another transaction's row is given only once that row survives a failover.
 *
 * A commit the primary made but the standby never confirmed becomes visible on the primary after a
 * crash and restart (crash recovery replays it), and the standby promoted a moment later never had
 * it. A transaction that wrote no WAL commits without waiting for the standby (a transaction id
 * alone is not enough), so a replay or a duplicate answered from such a row would acknowledge what
 * the failover then loses. A transactional logical message is a WAL record: the commit then waits
 * for the standby's confirmation, which covers every earlier commit.
 */
export async function answerOnceReplicated(tx: Tx): Promise<void> {
  await tx.execute(sql`select pg_logical_emit_message(true, 'idem', 'answer once replicated')`);
}
