import { randomUUID } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { databaseRefusal, ETH, fund, newTenant, submit, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { journalEntries, postings } from '../src/db/schema/index.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { postEntry } from '../src/journal/post-entry.ts';

let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-1', 'ETH', ETH);
});
afterAll(() => t.dispose());

describe('the journal is double-entry and append-only', () => {
  it('C11 the database refuses an unbalanced entry at commit', async () => {
    const entryId = randomUUID();
    const message = await databaseRefusal(
      withTenant(t.db, tenantId, async (tx) => {
        await tx
          .insert(journalEntries)
          .values({ tenantId, entryId, operationId: randomUUID(), kind: 'credit' });
        await tx.insert(postings).values([
          {
            tenantId,
            entryId,
            postingNo: 1,
            account: 'acct-1',
            bucket: 'available',
            assetCode: 'ETH',
            amount: '100',
          },
          {
            tenantId,
            entryId,
            postingNo: 2,
            account: '@custody',
            bucket: 'control',
            assetCode: 'ETH',
            amount: '-99',
          },
        ]);
      }),
    );
    expect(message).toMatch(/does not balance/);
    const stored = await t.db.select().from(journalEntries).where(sql`entry_id = ${entryId}`);
    expect(stored).toHaveLength(0);
  });

  it('C11 an entry that balances in total but not per asset is refused', async () => {
    const entryId = randomUUID();
    const message = await databaseRefusal(
      withTenant(t.db, tenantId, async (tx) => {
        await tx
          .insert(journalEntries)
          .values({ tenantId, entryId, operationId: randomUUID(), kind: 'credit' });
        await tx.insert(postings).values([
          {
            tenantId,
            entryId,
            postingNo: 1,
            account: 'acct-1',
            bucket: 'available',
            assetCode: 'ETH',
            amount: '100',
          },
          {
            tenantId,
            entryId,
            postingNo: 2,
            account: '@custody',
            bucket: 'control',
            assetCode: 'BTC',
            amount: '-100',
          },
        ]);
      }),
    );
    expect(message).toMatch(/does not balance in (ETH|BTC)/);
  });

  it('C11 postEntry asserts balance in code before the database sees it', async () => {
    await expect(
      withTenant(t.db, tenantId, (tx) =>
        postEntry(tx, {
          tenantId,
          operationId: randomUUID(),
          kind: 'credit',
          postings: [
            { account: 'acct-1', bucket: 'available', assetCode: 'ETH', amount: 5n },
            { account: '@custody', bucket: 'control', assetCode: 'ETH', amount: -4n },
          ],
        }),
      ),
    ).rejects.toThrow(/does not balance/);
  });

  it('C11 UPDATE and DELETE of journal rows are refused by the database, for the owner too', async () => {
    await submit(t.db, tenantId, withdrawal({ amountMinor: '10' }), 'journal-k1');
    // t.db is the owning (superuser) connection: triggers bind it as well.
    for (const statement of [
      sql`update postings set amount = amount * 2`,
      sql`delete from postings`,
      sql`update journal_entries set kind = 'credit'`,
      sql`delete from journal_entries`,
      sql`truncate postings`,
      sql`update operation_transitions set actor = 'someone-else'`,
      sql`delete from operation_transitions`,
      sql`delete from operations`,
    ]) {
      expect(await databaseRefusal(t.db.execute(statement))).toMatch(/append-only/);
    }
  });

  it('C11 the application role has no UPDATE or DELETE privilege on the journal at all', async () => {
    const message = await databaseRefusal(
      withTenant(t.db, tenantId, (tx) => tx.execute(sql`update postings set amount = amount where false`)),
    );
    expect(message).toMatch(/permission denied/);
  });
});

describe('the approved payload is immutable', () => {
  it('C02 the database rejects an UPDATE of the stored hash or of any approved field', async () => {
    const created = await submit(t.db, tenantId, withdrawal({ amountMinor: '10' }), 'immutable-k1');
    const id = created.operation.operationId;
    for (const change of [
      sql`payload_hash = 'x'`,
      sql`amount_minor = 11`,
      sql`destination = '0x0000000000000000000000000000000000000001'`,
      sql`idempotency_key = 'another-key'`,
      sql`reference = 'another-reference'`,
      sql`tenant_id = gen_random_uuid()`,
    ]) {
      const message = await databaseRefusal(
        t.db.execute(sql`update operations set ${change}, version = version + 1 where operation_id = ${id}`),
      );
      expect(message).toMatch(/immutable|cannot change/);
    }
  });
});
