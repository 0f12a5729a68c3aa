import { randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IdemError } from '@idem/contracts';
import {
  createTestDatabase,
  onPostgres,
  scratchPostgresDatabase,
  serverUrl,
  type TestDatabase,
} from '@idem/testing/database';
import { newTenant } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_GENESIS_HASH, verifyAuditChain } from '../src/audit/audit-chain.ts';
import { listAudit, recordAudit } from '../src/audit/audit-log.ts';
import { runAudited } from '../src/audit/audited-transaction.ts';
import { type Database, migrationsFolder } from '../src/db/connect.ts';
import { rowsOf } from '../src/db/rows.ts';
import { withTenant } from '../src/db/tenant-scope.ts';

/**
 * The audit log is a hash chain per tenant, computed by the database as each row is inserted, and
 * checked by a verifier that recomputes every hash itself. These prove: a burst of concurrent
 * inserts leaves a valid chain; an edit of one field, made directly in SQL by the owner, is
 * reported at exactly that row; a deleted row (in the middle or at the end) is reported; the
 * application role cannot write a row outside the chain nor move the chain head; a refusal is
 * recorded with its code in the transaction that refused.
 */
let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 12 });
});

afterAll(async () => {
  await database?.dispose();
});

const entry = (tenantId: string, n: number) => ({
  tenantId,
  actor: `staff:${n % 3}`,
  action: 'staffTest.act',
  outcome: n % 5 === 0 ? 'FORBIDDEN' : 'ok',
  sourceAddress: '127.0.0.1',
  requestId: randomUUID(),
  details: { n, note: `quote " backslash \\ newline \n é ☃`, nested: { b: 1.5, a: [true, null] } },
});

async function burst(tenantId: string, count: number): Promise<void> {
  await Promise.all(
    Array.from({ length: count }, (_, n) =>
      withTenant(database.db, tenantId, (tx) => recordAudit(tx, entry(tenantId, n))),
    ),
  );
}

const verify = (tenantId: string) =>
  withTenant(database.db, tenantId, (tx) => verifyAuditChain(tx, tenantId));

/** The chain's rows, in order, read by the owner. */
async function chain(tenantId: string) {
  return rowsOf<{ entry_id: string; chain_position: string; hash: string }>(
    await database.db.execute(
      sql`select entry_id, chain_position::text as chain_position, hash from audit_log where tenant_id = ${tenantId} order by audit_log.chain_position`,
    ),
  );
}

/** What a tamperer holding the owner's login does: set the append-only trigger aside for one statement. */
async function asOwnerBypassingAppendOnly(statement: ReturnType<typeof sql>): Promise<void> {
  await database.db.transaction(async (tx) => {
    await tx.execute(sql`alter table audit_log disable trigger audit_log_append_only`);
    await tx.execute(statement);
    await tx.execute(sql`alter table audit_log enable trigger audit_log_append_only`);
  });
}

describe('I31-AUDIT the audit log is a verified hash chain per tenant', () => {
  it('I31-AUDIT a concurrent burst of two tenants gives each one contiguous valid chain', async () => {
    const [first, second] = [await newTenant(database.db), await newTenant(database.db)];
    await Promise.all([burst(first, 40), burst(second, 25)]);
    const reports = [await verify(first), await verify(second)];
    expect(reports.map((r) => [r.ok, r.entries, r.break])).toEqual([
      [true, 40, null],
      [true, 25, null],
    ]);
    const rows = await chain(first);
    expect(rows.map((r) => r.chain_position)).toEqual(Array.from({ length: 40 }, (_, i) => String(i + 1)));
    expect(reports[0]?.headHash).toBe(rows.at(-1)?.hash);
    expect(reports[0]?.headHash).not.toBe(AUDIT_GENESIS_HASH);
  });

  it('I31-AUDIT an edit of one field by the owner in SQL is reported at exactly that row', async () => {
    const tenantId = await newTenant(database.db);
    await burst(tenantId, 12);
    const target = (await chain(tenantId))[6];
    if (!target) throw new Error('no seventh row');
    await asOwnerBypassingAppendOnly(
      sql`update audit_log set outcome = 'ok', details = details || '{"n": 99}' where entry_id = ${target.entry_id}`,
    );
    const report = await verify(tenantId);
    expect(report).toMatchObject({
      ok: false,
      entries: 6,
      break: { entryId: target.entry_id, position: 7, check: 'hash', found: target.hash },
    });
    expect(report.break?.expected).not.toBe(target.hash);
  });

  it('I31-AUDIT a deleted row is reported: in the middle at the row after it, at the end by the chain head', async () => {
    const tenantId = await newTenant(database.db);
    await burst(tenantId, 10);
    const rows = await chain(tenantId);
    await asOwnerBypassingAppendOnly(sql`delete from audit_log where entry_id = ${rows[9]?.entry_id ?? ''}`);
    expect((await verify(tenantId)).break).toEqual({
      entryId: null,
      position: 10,
      check: 'head',
      expected: `position 10, hash ${rows[9]?.hash}`,
      found: `position 9, hash ${rows[8]?.hash}`,
    });
    await asOwnerBypassingAppendOnly(sql`delete from audit_log where entry_id = ${rows[3]?.entry_id ?? ''}`);
    expect((await verify(tenantId)).break).toEqual({
      entryId: rows[4]?.entry_id,
      position: 5,
      check: 'link',
      expected: rows[2]?.hash,
      found: rows[3]?.hash,
    });
  });

  it('I31-AUDIT the application role cannot write an unchained row nor move the chain head', async () => {
    const tenantId = await newTenant(database.db);
    await burst(tenantId, 3);
    await withTenant(database.db, tenantId, (tx) =>
      tx.execute(sql`insert into audit_log (tenant_id, entry_id, actor, action, outcome, details, chain_position, prev_hash, hash)
        values (${tenantId}, ${randomUUID()}, 'staff:x', 'forged', 'ok', '{}', 99, ${'f'.repeat(64)}, ${'e'.repeat(64)})`),
    );
    const report = await verify(tenantId);
    expect([report.ok, report.entries]).toEqual([true, 4]);
    const moved = await withTenant(database.db, tenantId, (tx) =>
      tx.execute(sql`update audit_chain_heads set position = 1 where tenant_id = ${tenantId}`),
    ).then(
      () => null,
      (error: unknown) => error as Error,
    );
    expect(`${moved?.message} ${(moved?.cause as Error | undefined)?.message}`).toMatch(/permission denied/);
  });

  it('I31-AUDIT a refusal is recorded with its code in the refusing transaction, and what it wrote is undone', async () => {
    const tenantId = await newTenant(database.db);
    const audit = {
      okWhen: 'wrote' as const,
      entry: (outcome: string) => ({ tenantId, actor: 'staff:r', action: 'staffTest.refuse', outcome }),
    };
    const result = await runAudited(database.db, tenantId, audit, async (tx) => {
      await recordAudit(tx, { tenantId, actor: 'staff:r', action: 'staffTest.partial', outcome: 'ok' });
      throw new IdemError('FORBIDDEN', 'not you');
    });
    expect(result.outcome).toBe('refused');
    const read = await runAudited(database.db, tenantId, audit, async () => 'only read');
    expect(read).toEqual({ outcome: 'ok', value: 'only read', recorded: false });
    const { items } = await withTenant(database.db, tenantId, (tx) => listAudit(tx, tenantId, {}));
    expect(items.map((e) => `${e.action} ${e.outcome}`)).toEqual(['staffTest.refuse FORBIDDEN']);
    expect((await verify(tenantId)).ok).toBe(true);
  });
});

/** The migrations folder as it stood before the migration tagged `tag`: a copy without it and what follows. */
function migrationsBefore(tag: string): { folder: string; remove(): void } {
  const folder = mkdtempSync(join(tmpdir(), 'idem-migrations-'));
  cpSync(migrationsFolder, folder, { recursive: true });
  const journalPath = join(folder, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as {
    entries: { idx: number; tag: string }[];
  };
  const cut = journal.entries.find((entry) => entry.tag.endsWith(`_${tag}`))?.idx;
  if (cut === undefined) throw new Error(`no migration tagged ${tag}`);
  const later = journal.entries.filter((entry) => entry.idx >= cut).map((entry) => `${entry.tag}.sql`);
  for (const file of readdirSync(folder)) if (later.includes(file)) rmSync(join(folder, file));
  journal.entries = journal.entries.filter((entry) => entry.idx < cut);
  writeFileSync(journalPath, JSON.stringify(journal));
  return { folder, remove: () => rmSync(folder, { recursive: true, force: true }) };
}

describe.skipIf(!onPostgres)(
  'I31-AUDIT the migration chains the rows logged before the chain (PostgreSQL)',
  () => {
    it('I31-AUDIT rows of two tenants logged before the chain migration verify after it, and new rows extend them', async () => {
      const scratch = await scratchPostgresDatabase(serverUrl() ?? '', 'idem_chain');
      const client = postgres(scratch.url, { max: 2, onnotice: () => {} });
      const before = migrationsBefore('audit_chain');
      try {
        const db = drizzle(client) as unknown as Database;
        await migrate(drizzle(client), { migrationsFolder: before.folder });
        // The schema of that time: raw SQL as the owner, since today's code writes later columns.
        const tenants = [randomUUID(), randomUUID()];
        for (const tenantId of tenants) {
          await db.execute(sql`insert into tenants (tenant_id, name) values (${tenantId}, 'Old log')`);
          for (let n = 0; n < 5; n += 1) {
            await db.execute(sql`insert into audit_log (tenant_id, entry_id, actor, action, outcome, details)
            values (${tenantId}, ${randomUUID()}, 'staff:old', ${`old.${n}`}, 'ok', ${JSON.stringify({ n, q: 'a"b' })}::jsonb)`);
          }
        }
        await migrate(drizzle(client), { migrationsFolder });
        for (const tenantId of tenants) {
          await withTenant(db, tenantId, (tx) =>
            recordAudit(tx, { tenantId, actor: 'staff:new', action: 'new', outcome: 'ok' }),
          );
          const report = await withTenant(db, tenantId, (tx) => verifyAuditChain(tx, tenantId));
          expect([report.ok, report.entries, report.break]).toEqual([true, 6, null]);
        }
      } finally {
        before.remove();
        await client.end();
        await scratch.drop();
      }
    });
  },
);
