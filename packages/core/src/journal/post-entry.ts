import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { rowsOf } from '../db/rows.ts';

export type Bucket = 'available' | 'held' | 'control';

export interface Posting {
  /** A customer account reference, or a system account ('@custody', '@adjustments'). */
  account: string;
  bucket: Bucket;
  assetCode: string;
  /** Signed, in minor units; positive credits a customer. */
  amount: bigint;
}

export type EntryKind =
  | 'hold'
  | 'release'
  | 'settle'
  | 'unsettle'
  | 'credit'
  | 'debit'
  | 'reverse_credit'
  | 'network_fee'
  | 'network_fee_reversal';

/**
 * '@network_fees' is the tenant's network-fee expense: the gas its hot wallets paid, in the
 * network's native asset, taken out of custody when a withdrawal confirms (docs/LEDGER.md).
 */
export const SYSTEM_ACCOUNTS = {
  custody: '@custody',
  adjustments: '@adjustments',
  networkFees: '@network_fees',
} as const;

export type PostResult = { ok: true; entryId: string } | { ok: false; code: 'INSUFFICIENT_FUNDS' };

/**
 * Writes one balanced journal entry in one round trip (`idem_post_entry`, core/sql/idem_post_entry.sql). The
 * database applies its customer postings to the balance projection itself (a trigger on postings,
 * the only writer of `balances`): each account's change is a conditional write that keeps both
 * buckets non-negative, so the data store refuses an overspend (C08). A refused entry returns
 * `{ ok: false }` having changed nothing, and the transaction stays usable. The database checks
 * the entry balances at commit (C11); it is asserted here too.
 */
export async function postEntry(
  tx: Tx,
  entry: { tenantId: string; operationId: string; kind: EntryKind; postings: Posting[] },
): Promise<PostResult> {
  assertBalanced(entry.postings);
  const entryId = randomUUID();
  const rows = entry.postings.map((posting, index) => ({
    posting_no: index + 1,
    account: posting.account,
    bucket: posting.bucket,
    asset_code: posting.assetCode,
    amount: posting.amount.toString(),
  }));
  const [result] = rowsOf<{ posted: boolean }>(
    await tx.execute(
      sql`select idem_post_entry(${entry.tenantId}::uuid, ${entryId}::uuid, ${entry.operationId}::uuid, ${entry.kind}, ${JSON.stringify(rows)}::jsonb) as posted`,
    ),
  );
  if (result?.posted !== true) return { ok: false, code: 'INSUFFICIENT_FUNDS' };
  return { ok: true, entryId };
}

function assertBalanced(entryPostings: Posting[]): void {
  if (entryPostings.length < 2) throw new Error('a journal entry needs at least two postings');
  const sums = new Map<string, bigint>();
  for (const posting of entryPostings) {
    if (posting.amount === 0n) throw new Error('a posting cannot be zero');
    if (posting.account.startsWith('@') !== (posting.bucket === 'control')) {
      throw new Error(`posting to ${posting.account} uses the wrong bucket ${posting.bucket}`);
    }
    sums.set(posting.assetCode, (sums.get(posting.assetCode) ?? 0n) + posting.amount);
  }
  for (const [asset, sum] of sums) {
    if (sum !== 0n) throw new Error(`journal entry does not balance in ${asset}: ${sum}`);
  }
}
