import { randomBytes } from 'node:crypto';
import { creditAsOperator, type Database, withDatabase } from '@idem/core';
import postgres from 'postgres';

/** The server the benches run against: DATABASE_URL, or the local one. */
export const BASE_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

/** A fresh, empty database on the bench's server, and a way to drop it. */
export async function scratchDatabase(prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${process.pid}_${randomBytes(3).toString('hex')}`;
  const admin = postgres(BASE_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  await admin.end();
  return {
    url: withDatabase(BASE_URL, name),
    drop: async () => {
      const dropper = postgres(BASE_URL, { max: 1, onnotice: () => {} });
      await dropper.unsafe(`drop database if exists "${name}" with (force)`);
      await dropper.end();
    },
  };
}

/** Gives each account 10^24 minor units of ETH, so no bench call is refused for funds. */
export async function fundAccounts(db: Database, tenantId: string, accounts: string[]): Promise<void> {
  for (let i = 0; i < accounts.length; i += 50)
    await Promise.all(
      accounts.slice(i, i + 50).map((accountId) =>
        // As the deployment's operator: the application's role credits nothing without evidence.
        creditAsOperator(db, {
          tenantId,
          deposit: {
            reference: `fund-${accountId}`,
            accountId,
            asset: 'ETH',
            amountMinor: (10n ** 24n).toString(),
          },
          idempotencyKey: `deposit-fund-${accountId}`,
          actor: 'bench',
        }),
      ),
    );
}
