import { randomBytes, randomUUID } from 'node:crypto';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { balanceOf, databaseRefusal, ETH, fund, newTenant, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../src/db/connect.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';
import { markObservation, observationsIn, observeDeposit } from '../src/deposits/watch.ts';
import { postEntry } from '../src/journal/post-entry.ts';
import { createWithdrawal, submitWithdrawal } from '../src/operations/create-withdrawal.ts';
import { recordDeposit } from '../src/operations/record-credit.ts';

/**
 * The database's own guards (I11-F8): the database's own guards hold against a session that has the
 * application's login. The attacks run as a login role that is a member of idem_app, neither
 * superuser nor owner, connected directly (the production setup of docs/API.md).
 */
let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db, 'Guarded');
  await fund(t.db, tenantId, 'acct-1', 'ETH', ETH);
});
afterAll(() => t.dispose());

describe('every function in the schema pins its search_path (both backends)', () => {
  it('I11-F8 every function in schema public has search_path = pg_catalog, public, pg_temp in its own settings', async () => {
    // Extension members are the extension's business; everything else is ours, including
    // functions added by later migrations: this enumeration catches them.
    const functions = rowsOf<{ name: string; config: string[] | null }>(
      await t.db.execute(sql`
        select p.oid::regprocedure::text as name, p.proconfig as config
          from pg_proc p join pg_namespace n on n.oid = p.pronamespace
         where n.nspname = 'public'
           and not exists (select 1 from pg_depend d
                            where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
         order by 1`),
    );
    expect(functions.length).toBeGreaterThan(5);
    const unpinned = functions
      .filter((fn) => {
        const setting = (fn.config ?? []).find((entry) => entry.startsWith('search_path='));
        const path = setting
          ?.slice('search_path='.length)
          .split(',')
          .map((schema) => schema.trim().replaceAll('"', ''));
        return path?.join(',') !== 'pg_catalog,public,pg_temp';
      })
      .map((fn) => `${fn.name} ${JSON.stringify(fn.config)}`);
    expect(unpinned, 'ALTER FUNCTION ... SET search_path = pg_catalog, public, pg_temp').toEqual([]);
  });

  it('I11-F8 nobody but the owner may create temporary tables in the database', async () => {
    const [row] = rowsOf<{ public_temp: boolean; app_temp: boolean }>(
      await t.db.execute(sql`
        select exists (select 1 from pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
                        where d.datname = current_database() and a.grantee = 0
                          and a.privilege_type = 'TEMPORARY') as public_temp,
               has_database_privilege('idem_app', current_database(), 'TEMPORARY') as app_temp`),
    );
    expect(row).toEqual({ public_temp: false, app_temp: false });
  });

  it('I11-F8 the application role cannot write balances directly, only the journal can', async () => {
    for (const statement of [
      sql`update balances set available = available + 1 where account_ref = 'acct-1'`,
      sql`insert into balances (tenant_id, account_ref, asset_code, available) values (${tenantId}, 'acct-free', 'ETH', 1)`,
      sql`delete from balances where account_ref = 'acct-1'`,
    ]) {
      expect(await databaseRefusal(withTenant(t.db, tenantId, (tx) => tx.execute(statement)))).toMatch(
        /permission denied/,
      );
    }
    expect(await balanceOf(t.db, tenantId, 'acct-1')).toEqual({ available: ETH, held: 0n });
  });

  it('I11-F8 postEntry still refuses an overspend without changing anything, and applies a good entry', async () => {
    await fund(t.db, tenantId, 'acct-post', 'ETH', 100n);
    const result = await withTenant(t.db, tenantId, async (tx) => {
      const refused = await postEntry(tx, {
        tenantId,
        operationId: randomUUID(),
        kind: 'debit',
        postings: [
          { account: 'acct-post', bucket: 'available', assetCode: 'ETH', amount: -101n },
          { account: '@adjustments', bucket: 'control', assetCode: 'ETH', amount: 101n },
        ],
      });
      // The transaction is still usable after a refusal: the same transaction posts a good entry.
      const accepted = await postEntry(tx, {
        tenantId,
        operationId: randomUUID(),
        kind: 'hold',
        postings: [
          { account: 'acct-post', bucket: 'available', assetCode: 'ETH', amount: -60n },
          { account: 'acct-post', bucket: 'held', assetCode: 'ETH', amount: 60n },
        ],
      });
      return { refused, accepted };
    });
    expect(result.refused).toEqual({ ok: false, code: 'INSUFFICIENT_FUNDS' });
    expect(result.accepted.ok).toBe(true);
    expect(await balanceOf(t.db, tenantId, 'acct-post')).toEqual({ available: 40n, held: 60n });
  });
});

describe.skipIf(!onPostgres)('attacks as the application login role (real PostgreSQL)', () => {
  const role = `idem_login_${randomBytes(4).toString('hex')}`;
  let owner: postgres.Sql;
  let attacker: postgres.Sql;
  let login: DatabaseHandle;

  beforeAll(async () => {
    owner = postgres(t.url ?? '', { max: 1, onnotice: () => {} });
    await owner.unsafe(
      `create role ${role} login nosuperuser nocreatedb nocreaterole nobypassrls in role idem_app`,
    );
    const url = new URL(t.url ?? '');
    url.username = role;
    attacker = postgres(url.toString(), { max: 1, onnotice: () => {}, types: {} });
    login = await openDatabase({ url: url.toString(), maxConnections: 2 });
  });

  afterAll(async () => {
    await login?.close();
    await attacker?.end();
    // The role is cluster-wide; it holds no privilege in the database any more (TEMP is revoked
    // in the test that grants it), so it can go before the database does.
    try {
      await owner?.unsafe(`drop role if exists ${role}`);
    } finally {
      await owner?.end();
    }
  });

  /** One attacker transaction bound to the tenant, as the login role itself (no SET ROLE). */
  function asAttacker<T>(work: (sql: postgres.TransactionSql) => Promise<T>): Promise<T> {
    return attacker.begin(async (sql) => {
      await sql`select set_config('app.tenant_id', ${tenantId}, true)`;
      return work(sql);
    }) as Promise<T>;
  }

  async function unbalancedEntry(sql: postgres.TransactionSql) {
    const entryId = randomUUID();
    await sql`insert into public.journal_entries (tenant_id, entry_id, operation_id, kind)
              values (${tenantId}, ${entryId}, ${randomUUID()}, 'credit')`;
    await sql`insert into public.postings (tenant_id, entry_id, posting_no, account, bucket, asset_code, amount)
              values (${tenantId}, ${entryId}, 1, 'acct-1', 'available', 'ETH', 1000),
                     (${tenantId}, ${entryId}, 2, '@custody', 'control', 'ETH', -1)`;
    return entryId;
  }

  async function entryExists(entryId: string): Promise<boolean> {
    const [row] = await owner`select count(*)::int as n from journal_entries where entry_id = ${entryId}`;
    return row?.n === 1;
  }

  it('I11-F8 the login role may not create a temporary table to shadow postings', async () => {
    let entryId = '';
    const message = await databaseRefusal(
      asAttacker(async (sql) => {
        await sql`create temporary table postings (like public.postings) on commit drop`;
        entryId = await unbalancedEntry(sql);
      }),
    );
    expect(message).toMatch(/permission denied to create temporary tables/);
    expect(entryId === '' || !(await entryExists(entryId))).toBe(true);
  });

  /**
   * TEMP granted to this login by the owner for one test only: the pinned search_path alone must
   * then keep the functions on the real tables.
   */
  async function holdingTemp(work: () => Promise<void>): Promise<void> {
    const database = new URL(t.url ?? '').pathname.slice(1);
    await owner.unsafe(`grant temporary on database "${database}" to ${role}`);
    try {
      await work();
    } finally {
      await owner.unsafe(`revoke temporary on database "${database}" from ${role}`);
    }
  }

  it('I11-F8 even holding TEMP, a shadow postings table does not let an unbalanced entry commit', async () => {
    await holdingTemp(async () => {
      let entryId = '';
      const message = await databaseRefusal(
        asAttacker(async (sql) => {
          await sql`create temporary table postings (like public.postings) on commit drop`;
          await sql`grant all on pg_temp.postings to public`;
          entryId = await unbalancedEntry(sql);
        }),
      );
      expect(message).toMatch(/does not balance/);
      expect(await entryExists(entryId)).toBe(false);
    });
  });

  it('I11-F8 even holding TEMP, shadow balances, postings and journal_entries do not let a withdrawal skip its hold', async () => {
    await holdingTemp(async () => {
      // Shadow ledger tables with a fat balance: the hold must still be placed on the real
      // balance, which cannot cover 5 ETH, so the withdrawal is rejected.
      const rows = await asAttacker(async (sql) => {
        for (const table of ['balances', 'postings', 'journal_entries']) {
          await sql.unsafe(
            `create temporary table ${table} (like public.${table} including defaults) on commit drop`,
          );
          await sql.unsafe(`grant all on pg_temp.${table} to public`);
        }
        await sql`insert into pg_temp.balances (tenant_id, account_ref, asset_code, available, held)
                  values (${tenantId}, 'acct-1', 'ETH', ${(100n * ETH).toString()}, 0)`;
        return sql`select state, rejection_code from idem_create_withdrawal(
          ${tenantId}::uuid, ${randomUUID()}::uuid, ${`shadow-${randomUUID()}`}, ${`shadow-${randomUUID()}`},
          'acct-1', 'ETH', 'ethereum', ${'0x0000000000000000000000000000000000000001'}, null,
          ${(5n * ETH).toString()}::numeric, null, 1, ${'x'.repeat(64)}, 'attacker')`;
      });
      expect(rows.map((row) => ({ ...row }))).toEqual([
        { state: 'REJECTED', rejection_code: 'INSUFFICIENT_FUNDS' },
      ]);
      expect(await balanceOf(t.db, tenantId, 'acct-1')).toEqual({ available: ETH, held: 0n });
    });
  });

  it('I11-F8 an UPDATE, INSERT or DELETE of balances by the login role is refused', async () => {
    for (const statement of [
      `update balances set available = available + ${ETH} where account_ref = 'acct-1'`,
      `insert into balances (tenant_id, account_ref, asset_code, available) values ('${tenantId}', 'acct-free', 'ETH', ${ETH})`,
      `delete from balances where account_ref = 'acct-1'`,
    ]) {
      expect(await databaseRefusal(asAttacker((sql) => sql.unsafe(statement)))).toMatch(/permission denied/);
    }
    expect(await balanceOf(t.db, tenantId, 'acct-1')).toEqual({ available: ETH, held: 0n });
  });

  it('I11-F8 deposits and withdrawals still work as the login role, and balances follow postings', async () => {
    // The login's credit comes the way the chain watcher makes one: from an observation it credits
    // (a direct credit is the owner's alone, I32-DB).
    await withTenant(login.db, tenantId, async (tx) => {
      const depositId = `0x${randomBytes(32).toString('hex')}:0`;
      const observation = {
        tenantId,
        depositId,
        network: 'ethereum',
        accountRef: 'acct-login',
        assetCode: 'ETH',
        amountMinor: (2n * ETH).toString(),
        blockNumber: 1,
        blockHash: `0x${'ab'.repeat(32)}`,
      };
      await observeDeposit(tx, observation);
      const claim = await recordDeposit(tx, {
        tenantId,
        deposit: {
          reference: depositId,
          accountId: 'acct-login',
          asset: 'ETH',
          amountMinor: observation.amountMinor,
        },
        idempotencyKey: `deposit-chain-${depositId}`,
        actor: 'chain-watcher',
      });
      const seen = (await observationsIn(tx, tenantId, ['seen'])).find((o) => o.depositId === depositId);
      if (!seen) throw new Error('the observation was not stored');
      await markObservation(tx, seen, 'credited', claim.operation.operationId);
    });
    const created = await withTenant(login.db, tenantId, (tx) =>
      createWithdrawal(tx, {
        tenantId,
        request: withdrawal({ accountId: 'acct-login', amountMinor: (ETH / 2n).toString() }),
        idempotencyKey: `login-${randomUUID()}`,
      }),
    );
    expect([created.outcome, created.operation.state]).toEqual(['CREATED', 'REQUESTED']);
    const oneStatement = await submitWithdrawal(login.db, {
      tenantId,
      request: withdrawal({ accountId: 'acct-login', amountMinor: ETH.toString() }),
      idempotencyKey: `login-${randomUUID()}`,
    });
    expect(oneStatement.operation.state).toBe('REQUESTED');
    const tooMuch = await submitWithdrawal(login.db, {
      tenantId,
      request: withdrawal({ accountId: 'acct-login', amountMinor: ETH.toString() }),
      idempotencyKey: `login-${randomUUID()}`,
    });
    expect([tooMuch.operation.state, tooMuch.operation.rejectionCode]).toEqual([
      'REJECTED',
      'INSUFFICIENT_FUNDS',
    ]);
    expect(await balanceOf(t.db, tenantId, 'acct-login')).toEqual({
      available: ETH / 2n,
      held: ETH + ETH / 2n,
    });
    // The projection equals the postings, account by account.
    const drift = await owner`
      select b.account_ref from balances b
        left join (select tenant_id, account, asset_code,
                          sum(amount) filter (where bucket = 'available') as available,
                          sum(amount) filter (where bucket = 'held') as held
                     from postings group by 1, 2, 3) p
          on p.tenant_id = b.tenant_id and p.account = b.account_ref and p.asset_code = b.asset_code
       where b.account_ref = 'acct-login'
         and (b.available <> coalesce(p.available, 0) or b.held <> coalesce(p.held, 0))`;
    expect(drift).toEqual([]);
  });
});
