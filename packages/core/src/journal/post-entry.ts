import { randomUUID } from 'node:crypto';
import { and, eq, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { balances, journalEntries, postings } from '../db/schema/index.ts';

export type Bucket = 'available' | 'held' | 'control';

export interface Posting {
  /** A customer account reference, or a system account ('@custody', '@adjustments'). */
  account: string;
  bucket: Bucket;
  assetCode: string;
  /** Signed, in minor units; positive credits a customer. */
  amount: bigint;
}

export type EntryKind = 'hold' | 'release' | 'settle' | 'unsettle' | 'credit' | 'debit' | 'reverse_credit';

export const SYSTEM_ACCOUNTS = { custody: '@custody', adjustments: '@adjustments' } as const;

export type PostResult = { ok: true; entryId: string } | { ok: false; code: 'INSUFFICIENT_FUNDS' };

/**
 * Writes one balanced journal entry and applies its customer postings to the balance projection.
 * Debits are applied by a conditional UPDATE (`... WHERE available + delta >= 0`), so the data
 * store refuses an overspend (C08); a refused first debit returns `{ ok: false }` having changed
 * nothing. The database checks the entry balances at commit (C11); it is asserted here too.
 */
export async function postEntry(
  tx: Tx,
  entry: { tenantId: string; operationId: string; kind: EntryKind; postings: Posting[] },
): Promise<PostResult> {
  assertBalanced(entry.postings);
  const deltas = customerDeltas(entry.postings);
  // Debits first: if the first debit is refused, nothing has been written yet.
  deltas.sort((a, b) => Number(isCredit(a)) - Number(isCredit(b)));
  let applied = 0;
  for (const delta of deltas) {
    const ok = await applyDelta(tx, entry.tenantId, delta);
    if (!ok) {
      if (applied === 0) return { ok: false, code: 'INSUFFICIENT_FUNDS' };
      // A later debit failing would leave a half-applied entry: abort the whole transaction.
      throw new Error(
        `postEntry: debit refused after ${applied} balance changes; transaction must roll back`,
      );
    }
    applied += 1;
  }
  const entryId = randomUUID();
  await tx.insert(journalEntries).values({
    tenantId: entry.tenantId,
    entryId,
    operationId: entry.operationId,
    kind: entry.kind,
  });
  await tx.insert(postings).values(
    entry.postings.map((posting, index) => ({
      tenantId: entry.tenantId,
      entryId,
      postingNo: index + 1,
      account: posting.account,
      bucket: posting.bucket,
      assetCode: posting.assetCode,
      amount: posting.amount.toString(),
    })),
  );
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

interface Delta {
  account: string;
  assetCode: string;
  available: bigint;
  held: bigint;
}

function customerDeltas(entryPostings: Posting[]): Delta[] {
  const byKey = new Map<string, Delta>();
  for (const posting of entryPostings) {
    if (posting.bucket === 'control') continue;
    const key = `${posting.account}\u0000${posting.assetCode}`;
    const delta = byKey.get(key) ?? {
      account: posting.account,
      assetCode: posting.assetCode,
      available: 0n,
      held: 0n,
    };
    if (posting.bucket === 'available') delta.available += posting.amount;
    else delta.held += posting.amount;
    byKey.set(key, delta);
  }
  return [...byKey.values()].filter((delta) => delta.available !== 0n || delta.held !== 0n);
}

function isCredit(delta: Delta): boolean {
  return delta.available >= 0n && delta.held >= 0n;
}

async function applyDelta(tx: Tx, tenantId: string, delta: Delta): Promise<boolean> {
  const available = delta.available.toString();
  const held = delta.held.toString();
  if (isCredit(delta)) {
    // Pure credit: create the balance row on first use.
    await tx
      .insert(balances)
      .values({ tenantId, accountRef: delta.account, assetCode: delta.assetCode, available, held })
      .onConflictDoUpdate({
        target: [balances.tenantId, balances.accountRef, balances.assetCode],
        set: {
          available: sql`${balances.available} + ${available}::numeric`,
          held: sql`${balances.held} + ${held}::numeric`,
          version: sql`${balances.version} + 1`,
          updatedAt: sql`now()`,
        },
      });
    return true;
  }
  const updated = await tx
    .update(balances)
    .set({
      available: sql`${balances.available} + ${available}::numeric`,
      held: sql`${balances.held} + ${held}::numeric`,
      version: sql`${balances.version} + 1`,
      updatedAt: sql`now()`,
    })
    .where(
      and(
        eq(balances.tenantId, tenantId),
        eq(balances.accountRef, delta.account),
        eq(balances.assetCode, delta.assetCode),
        sql`${balances.available} + ${available}::numeric >= 0`,
        sql`${balances.held} + ${held}::numeric >= 0`,
      ),
    )
    .returning({ version: balances.version });
  return updated.length === 1;
}
