import type { Sql } from 'postgres';
import { sleep } from './integrators.ts';
import type { Landed } from './invariants.ts';
import { ETH_CONFIRMATIONS } from './setup.ts';

/**
 * Waits, once the faults are taken back, until every withdrawal is final (or owned by a named
 * person) and the inbox is processed, or `quietMsMax` has passed since `quietStarted`.
 */
export async function waitForConvergence(
  sql: Sql,
  landed: Landed,
  quietStarted: number,
  quietMsMax: number,
): Promise<{ convergedAfterMs: number | null; outstanding: string }> {
  let outstanding = '';
  while (Date.now() - quietStarted < quietMsMax) {
    const [row] = await sql<{ stuck: number; received: number }[]>`
      select (select count(*) from operations where kind = 'withdrawal'
              and not (state in ('CONFIRMED', 'REJECTED', 'VERIFIED_NOT_SENT')
                       or (state in ('UNKNOWN', 'FAILED_TERMINAL') and owner is not null)))::int as stuck,
             (select count(*) from inbox_events where status = 'RECEIVED')::int as received`;
    const settled = row?.stuck === 0 && (!landed.inboxProcessing || row.received === 0);
    outstanding = `${row?.stuck ?? '?'} withdrawals not final, ${row?.received ?? '?'} inbox events unprocessed`;
    // Deposits need the chain to move past their depth: give it a few blocks after the faults.
    if (settled && Date.now() - quietStarted > (ETH_CONFIRMATIONS + 4) * 1_000) {
      return { convergedAfterMs: Date.now() - quietStarted, outstanding };
    }
    await sleep(1_000);
  }
  return { convergedAfterMs: null, outstanding };
}
