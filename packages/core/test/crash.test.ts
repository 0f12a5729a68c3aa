import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { journalEntries, operations, workItems } from '../src/db/schema/index.ts';
import type { CreationStep } from '../src/operations/create-withdrawal.ts';
import { balanceOf, fund, newTenant, submit, withdrawal } from './fixtures.ts';
import { createTestDatabase, onPostgres, type TestDatabase } from './harness.ts';

const script = fileURLToPath(new URL('./processes/create-until-killed.ts', import.meta.url));

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
      const deadline = Date.now() + 30_000;
      for (;;) {
        // Statistics views are a snapshot per transaction: take a fresh one each time.
        await sql`select pg_stat_clear_snapshot()`;
        const waiting = await sql`select count(*)::int as n from pg_stat_activity
          where query like '%idem_create_withdrawal%' and wait_event_type = 'Lock' and pid <> pg_backend_pid()`;
        if ((waiting[0]?.n ?? 0) > 0) break;
        if (Date.now() > deadline) throw new Error('the child never blocked inside creation');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const exited = new Promise((resolve) => child.on('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    });
    await release;
    await blocker.end();
    // PostgreSQL notices the dead client and rolls its transaction back.
    const deadline = Date.now() + 15_000;
    while ((await countWhere(operations, sql`idempotency_key = ${key}`)) > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await expectNoTrace(key, before);
    await expectRetryCreatesOnce(key, request, before);
  });
});
