import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type Database,
  type DatabaseHandle,
  getBalances,
  openDatabase,
  schema,
  withTenant,
} from '@idem/core';
import { scratchPostgresDatabase, serverUrl } from '@idem/testing/database';
import { count, eq } from 'drizzle-orm';
import { expect } from 'vitest';
import type { CliRun } from './cli-process.ts';

// What the CLI test files read from a run and from the database the CLI left behind.

/** The one JSON line a `--json` command prints, after checking it succeeded. */
export function printed<T>(run: CliRun): T {
  expect(run, run.stderr).toMatchObject({ code: 0, stderr: '' });
  const lines = run.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0] ?? '') as T;
}

/** What refusing `promise` threw (fails the test if it resolved). */
export async function refusal(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a refusal, but the call succeeded');
    },
    (error: unknown) => error,
  );
}

/**
 * A database nothing has touched yet, not even migrations: an empty data directory on PGlite, a
 * newly created, empty database on PostgreSQL. `open` opens it without migrating.
 */
export async function blankDatabase(kind: 'pglite' | 'postgres'): Promise<{
  env: Record<string, string>;
  open(): Promise<DatabaseHandle>;
  dispose(): Promise<void>;
}> {
  if (kind === 'pglite') {
    const dataDir = mkdtempSync(join(tmpdir(), 'idem-cli-'));
    return {
      env: { IDEM_DATA_DIR: dataDir },
      open: () => openDatabase({ dataDir: join(dataDir, 'pgdata') }),
      dispose: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const base = serverUrl();
  if (!base) throw new Error('PostgreSQL backend without a server URL');
  const scratch = await scratchPostgresDatabase(base, 'idem_cli');
  return {
    env: { DATABASE_URL: scratch.url, IDEM_DB_POOL_MAX: '2' },
    open: () => openDatabase({ url: scratch.url, maxConnections: 1 }),
    dispose: () => scratch.drop(),
  };
}

/** One account's operations and balances, and how many postings its tenant's journal holds. */
export async function ledgerOf(db: Database, tenantId: string, accountId: string) {
  return withTenant(db, tenantId, async (tx) => {
    const [operations] = await tx
      .select({ n: count() })
      .from(schema.operations)
      .where(eq(schema.operations.accountRef, accountId));
    const [postings] = await tx.select({ n: count() }).from(schema.postings);
    return {
      operations: Number(operations?.n),
      postings: Number(postings?.n),
      balances: await getBalances(tx, tenantId, accountId),
    };
  });
}
