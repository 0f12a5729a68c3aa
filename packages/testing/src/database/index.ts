import { randomBytes } from 'node:crypto';
import { type DatabaseHandle, openDatabase, parseConnectionString, withDatabase } from '@idem/core';
import postgres from 'postgres';
import { copyTemplate, migratedTemplate } from './template.ts';

/**
 * One harness for every test file: a real PostgreSQL server when TEST_DATABASE_URL or DATABASE_URL
 * is set (CI sets it), an in-memory PGlite otherwise. Each call gets its own fresh database, with
 * migrations applied, and prints which backend it used. On PostgreSQL the database is a copy of a
 * template migrated once per migrations folder (template.ts): a copy takes well under a second,
 * running the ~55 migrations took several.
 */
export interface TestDatabase extends DatabaseHandle {
  /** The database's own connection string (PostgreSQL only): for child processes and extra pools. */
  url: string | null;
  /** Drops the database (PostgreSQL) or closes it (PGlite). */
  dispose(): Promise<void>;
}

/** Under CI the local PostgreSQL server is used even when no URL is given. */
export const CI_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

export function serverUrl(): string | null {
  const url = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL;
  if (url) return url;
  return process.env.CI === 'true' || process.env.CI === '1' ? CI_DATABASE_URL : null;
}

export const onPostgres = serverUrl() !== null;

export async function createTestDatabase(options: { maxConnections?: number } = {}): Promise<TestDatabase> {
  const base = serverUrl();
  if (!base) {
    const handle = await openDatabase();
    await handle.migrate();
    console.info('[idem test] database: PGlite (in memory); set TEST_DATABASE_URL for PostgreSQL');
    return { ...handle, url: null, dispose: () => handle.close() };
  }
  const scratch = await scratchPostgresDatabase(base, 'idem_t', await migratedTemplate(base));
  const handle = await openDatabase({ url: scratch.url, maxConnections: options.maxConnections ?? 10 });
  const where = parseConnectionString(scratch.url);
  console.info(
    `[idem test] database: PostgreSQL ${where.hosts.map((h) => `${h.host}:${h.port}`).join(',')}/${where.database}`,
  );
  return {
    ...handle,
    url: scratch.url,
    dispose: async () => {
      await handle.close();
      await scratch.drop();
    },
  };
}

/**
 * A new database on the server at `base`, and a way to drop it: empty (nothing migrated), or a copy
 * of `template` (a migrated template from template.ts, with its database-level grants).
 */
export async function scratchPostgresDatabase(
  base: string,
  prefix: string,
  template?: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(base, { max: 1, onnotice: () => {} });
  try {
    if (template) await copyTemplate(admin, template, name);
    else await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end();
  }
  return {
    url: withDatabase(base, name),
    drop: async () => {
      const dropper = postgres(base, { max: 1, onnotice: () => {} });
      try {
        await dropper.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await dropper.end();
      }
    },
  };
}

export { ageOperationHistory, ageOperations, expireLease, makeControlChangeDue } from './aging.ts';
export { migratedPgliteDataDir } from './pglite.ts';
export { migratedTemplate } from './template.ts';
