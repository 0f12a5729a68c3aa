import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, onPostgres, type TestDatabase } from '@idem/testing/database';
import { balanceOf, fund, newTenant, submit, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { rowsOf } from '../src/db/rows.ts';
import { journalEntries, operations, workItems } from '../src/db/schema/index.ts';
import type { CreationStep } from '../src/operations/create-withdrawal.ts';
import { expectLedgerInvariants } from './ledger-invariants.ts';

const script = fileURLToPath(new URL('./processes/create-until-killed.ts', import.meta.url));
const batchScript = fileURLToPath(new URL('./processes/submit-until-killed.ts', import.meta.url));

let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  await fund(t.db, tenantId, 'acct-crash', 'ETH', 1000n);
});
afterAll(() => t.dispose());

/** Starts the child, waits until it reports being stopped at `step`, then kills it with SIGKILL. */
async function killAt(step: CreationStep, key: string, request: unknown): Promise<void> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', script, t.url ?? '', tenantId, step, key, JSON.stringify(request)],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += String(chunk);
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`child never reached ${step}: ${stderr}`)), 30_000);
    child.stdout.on('data', (chunk) => {
      if (String(chunk).includes(`STOPPED ${step}`)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('exit', () => reject(new Error(`child exited before ${step}: ${stderr}`)));
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

async function runningBatches(): Promise<number> {
  const [row] = rowsOf<{ n: number }>(
    await t.db.execute(sql`select count(*)::int as n from pg_stat_activity
      where query like '%idem_create_withdrawals%' and state = 'active' and pid <> pg_backend_pid()`),
  );
  return row?.n ?? 0;
}

async function countWhere(
  table: typeof operations | typeof journalEntries | typeof workItems,
  condition: ReturnType<typeof sql>,
) {
  const rows = await t.db.select({ n: sql<number>`count(*)::int` }).from(table).where(condition);
  return rows[0]?.n ?? 0;
}

async function expectNoTrace(key: string, before: { available: bigint; held: bigint }): Promise<void> {
  expect(await countWhere(operations, sql`idempotency_key = ${key}`)).toBe(0);
  expect(
    await countWhere(journalEntries, sql`operation_id not in (select operation_id from operations)`),
  ).toBe(0);
  expect(
    await countWhere(
      workItems,
      sql`operation_id is not null and operation_id not in (select operation_id from operations)`,
    ),
  ).toBe(0);
  expect(await balanceOf(t.db, tenantId, 'acct-crash')).toEqual(before);
}

async function expectRetryCreatesOnce(
  key: string,
  request: unknown,
  before: { available: bigint; held: bigint },
) {
  // The retry after the crash creates the operation once, with its hold: nothing was left locked.
  const retry = await submit(t.db, tenantId, request, key);
  expect(retry.outcome).toBe('CREATED');
  expect(await balanceOf(t.db, tenantId, 'acct-crash')).toEqual({
    available: before.available - 300n,
    held: before.held + 300n,
  });
}

describe.skipIf(!onPostgres)('a process killed in the middle of creation (real PostgreSQL)', () => {
  for (const step of ['validated', 'written'] as const) {
    it(`C10 SIGKILL after "${step}" leaves no orphan operation, hold, entry or work item`, async () => {
      const request = withdrawal({ accountId: 'acct-crash', amountMinor: '300' });
      const key = `crash-${step}`;
      const before = await balanceOf(t.db, tenantId, 'acct-crash');
      await killAt(step, key, request);
      await expectNoTrace(key, before);
      await expectRetryCreatesOnce(key, request, before);
    });
  }

  it('C10 SIGKILL while creation is inside its statement, between the identity claim and the hold, leaves no trace', async () => {
    const request = withdrawal({ accountId: 'acct-crash', amountMinor: '300' });
    const key = 'crash-mid-statement';
    const before = await balanceOf(t.db, tenantId, 'acct-crash');
    // Hold the account's balance row: the child's creation inserts the operation, its history and
    // its notification, then blocks at the hold. That is where it dies.
    const blocker = postgres(t.url ?? '', { max: 1, onnotice: () => {} });
    const release = blocker.begin(async (sql) => {
      await sql`select 1 from balances where account_ref = 'acct-crash' for update`;
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', script, t.url ?? '', tenantId, 'never', key, JSON.stringify(request)],
        {
          stdio: 'ignore',
        },
      );
      await vi.waitFor(
        async () => {
          // Statistics views are a snapshot per transaction: take a fresh one each time.
          await sql`select pg_stat_clear_snapshot()`;
          const waiting = await sql`select count(*)::int as n from pg_stat_activity
            where query like '%idem_create_withdrawal%' and wait_event_type = 'Lock' and pid <> pg_backend_pid()`;
          if ((waiting[0]?.n ?? 0) === 0) throw new Error('the child never blocked inside creation');
        },
        { timeout: 30_000, interval: 50 },
      );
      const exited = new Promise((resolve) => child.on('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    });
    await release;
    await blocker.end();
    // PostgreSQL notices the dead client and rolls its transaction back.
    await expect
      .poll(() => countWhere(operations, sql`idempotency_key = ${key}`), { timeout: 15_000, interval: 50 })
      .toBe(0);
    await expectNoTrace(key, before);
    await expectRetryCreatesOnce(key, request, before);
  });

  it('I17 C10 SIGKILL while a gathered batch is inside its statement leaves no item half-written; every key then creates once', async () => {
    await fund(t.db, tenantId, 'acct-batch-crash', 'ETH', 10_000n);
    const before = await balanceOf(t.db, tenantId, 'acct-batch-crash');
    const items = Array.from({ length: 20 }, (_, i) => ({
      key: `batch-crash-${i}`,
      request: withdrawal({ accountId: 'acct-batch-crash', amountMinor: '100' }),
    }));
    const blocker = postgres(t.url ?? '', { max: 1, onnotice: () => {} });
    let output = '';
    await blocker.begin(async (sql) => {
      // Hold the account's balance row: the lone first submission and the batch gathered behind it
      // both claim their keys, then wait here for the hold. That is where the process dies.
      await sql`select 1 from balances where account_ref = 'acct-batch-crash' for update`;
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', batchScript, t.url ?? '', tenantId, JSON.stringify(items)],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      child.stdout.on('data', (chunk) => {
        output += String(chunk);
      });
      await vi.waitFor(
        async () => {
          await sql`select pg_stat_clear_snapshot()`;
          const [batch] = await sql`select count(*)::int as n from pg_stat_activity
            where query like '%idem_create_withdrawal%' and wait_event_type = 'Lock' and pid <> pg_backend_pid()`;
          // Both statements are waiting, and the child reported the second as a gathered batch.
          if ((batch?.n ?? 0) < 2 || !/BATCH ([2-9]|\d\d)/.test(output)) {
            throw new Error(`the child never blocked inside a batch: ${output}`);
          }
        },
        { timeout: 30_000, interval: 50 },
      );
      // The child reports each statement it sends; one carried the gathered submissions.
      expect(Math.max(...[...output.matchAll(/BATCH (\d+)/g)].map((m) => Number(m[1])))).toBeGreaterThan(1);
      const exited = new Promise((resolve) => child.on('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    });
    await blocker.end();
    expect(output).not.toContain('ACK');
    // The statements ran on after their client died: each is one implicit transaction, so it commits
    // or rolls back whole, and nobody was told either way. Wait until both are over.
    await expect.poll(runningBatches, { timeout: 15_000, interval: 50 }).toBe(0);
    // No item half-written: every stored one has its history, its hold entry, its postings and its review.
    const [whole] = rowsOf<{ stored: number; complete: number }>(
      await t.db.execute(sql`select count(*)::int as stored, count(*) filter (where
          exists (select 1 from operation_transitions x where x.operation_id = o.operation_id and x.to_state = 'REQUESTED')
          and (select count(*) from journal_entries j join postings p using (tenant_id, entry_id)
                where j.operation_id = o.operation_id and j.kind = 'hold') = 2
          and exists (select 1 from work_items w where w.operation_id = o.operation_id and w.topic = 'withdrawal.review'))::int as complete
        from operations o where o.idempotency_key like 'batch-crash-%'`),
    );
    expect(whole?.complete).toBe(whole?.stored);
    // The lone first submission and each gathered batch are all or nothing: what is stored is the
    // sum of some of the statements the child sent (under load the twenty may leave in several
    // batches, as they fall due, and a batch still waiting for a connection never ran).
    const statements = [1, ...[...output.matchAll(/BATCH (\d+)/g)].map((m) => Number(m[1]))];
    const wholeStatements = statements.reduce(
      (sums, size) => [...sums, ...sums.map((sum) => sum + size)],
      [0],
    );
    expect(wholeStatements).toContain(whole?.stored);
    await expectLedgerInvariants(t.db, tenantId);
    // Each key retried after the crash is exactly one withdrawal: created now, or the one that committed.
    const retried = await Promise.all(items.map((item) => submit(t.db, tenantId, item.request, item.key)));
    expect(retried.filter((claim) => claim.outcome === 'CREATED')).toHaveLength(20 - (whole?.stored ?? 0));
    expect(await countWhere(operations, sql`idempotency_key like 'batch-crash-%'`)).toBe(20);
    expect(await balanceOf(t.db, tenantId, 'acct-batch-crash')).toEqual({
      available: before.available - 2_000n,
      held: before.held + 2_000n,
    });
  });
});
