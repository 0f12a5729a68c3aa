import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { type BatchingOptions, DEFAULT_BATCHING } from '../operations/withdrawal-batcher.ts';
import { parseConnectionString } from './connection-string.ts';

/** Either driver behind one type: core code never knows which PostgreSQL it runs on. */
export type Database = PgDatabase<PgQueryResultHKT, Record<string, never>>;
export type Tx = Parameters<Parameters<Database['transaction']>[0]>[0];
/** Anything that runs queries: a database or a transaction. */
export type Executor = Database | Tx;

export const migrationsFolder = fileURLToPath(new URL('../../drizzle', import.meta.url));

export interface DatabaseHandle {
  db: Database;
  kind: 'postgres' | 'pglite';
  /** The connection string for PostgreSQL, or the data directory (or 'memory') for PGlite. */
  location: string;
  migrate(): Promise<void>;
  close(): Promise<void>;
}

export interface OpenOptions {
  /**
   * A PostgreSQL connection string (connection-string.ts). Several hosts with
   * target_session_attrs=read-write reach whichever is primary, also after a failover. Without it,
   * an embedded PGlite database is used.
   */
  url?: string | undefined;
  /** PGlite data directory; in memory when absent. */
  dataDir?: string | undefined;
  /** Pool size for PostgreSQL. */
  maxConnections?: number;
  /**
   * How long one connection attempt, and with several hosts one search for a writable host, may
   * take before the statement waiting for it fails (seconds). Default 5 with several hosts (around
   * a failover a caller that fails fast retries onto the promoted primary; docs/OPERATIONS.md),
   * 30 with one.
   */
  connectTimeoutSeconds?: number;
  /**
   * Gathering of concurrent `submitWithdrawal` calls into one statement; `false` sends
   * each alone. Unset fields take the defaults (DEFAULT_BATCHING: one batch of a tenant in flight
   * at a time, the next gathering behind it).
   */
  batching?: Partial<BatchingOptions> | false;
}

const batching = new WeakMap<Database, BatchingOptions | false>();

/** The submission batching `openDatabase` settled for this database (withdrawal-batcher.ts). */
export function batchingOf(db: Database): BatchingOptions | false {
  return batching.get(db) ?? DEFAULT_BATCHING;
}

/** The given settings over the defaults, resolved once here for both drivers. */
function batchingSettings(options: OpenOptions): BatchingOptions | false {
  return options.batching === false ? false : { ...DEFAULT_BATCHING, ...options.batching };
}

export async function openDatabase(options: OpenOptions = {}): Promise<DatabaseHandle> {
  if (options.url) {
    const client = postgres(options.url, {
      max: options.maxConnections ?? 10,
      // With several hosts, failing fast lets callers retry onto the promoted primary; one host
      // keeps postgres.js's default, which a loaded machine's connection set-up stays well within.
      connect_timeout:
        options.connectTimeoutSeconds ?? (parseConnectionString(options.url).hosts.length > 1 ? 5 : 30),
      onnotice: () => {},
      // numeric(78,0) stays a string: amounts never pass through a float.
      types: {},
    });
    const db = drizzlePostgres(preparing(client)) as unknown as Database;
    batching.set(db, batchingSettings(options));
    return {
      db,
      kind: 'postgres',
      location: options.url,
      migrate: async () => {
        await migratePostgres(drizzlePostgres(client), { migrationsFolder });
      },
      close: async () => {
        await client.end({ timeout: 5 });
      },
    };
  }
  const client = options.dataDir ? new PGlite(options.dataDir) : new PGlite();
  await client.waitReady;
  const db = drizzlePglite(client) as unknown as Database;
  batching.set(db, batchingSettings(options));
  return {
    db,
    kind: 'pglite',
    location: options.dataDir ?? 'memory',
    migrate: async () => {
      await migratePglite(drizzlePglite(client), { migrationsFolder });
    },
    close: async () => {
      await client.close();
    },
  };
}

type Sql = postgres.Sql;

/**
 * Drizzle sends builder queries unprepared, so PostgreSQL parses and plans every statement anew.
 * This wraps a postgres.js client (and the clients it hands to transactions and savepoints) so
 * every statement is a named prepared statement, cached per connection by postgres.js: the same
 * queries, planned once. Measured by the core bench.
 */
function preparing<T extends Sql | postgres.TransactionSql>(sql: T): T {
  return new Proxy(sql, {
    get(target, property, receiver) {
      if (property === 'unsafe') {
        return (query: string, parameters?: unknown[], options?: postgres.UnsafeQueryOptions) =>
          target.unsafe(query, parameters as never, { ...options, prepare: true });
      }
      if (property === 'begin' || property === 'savepoint') {
        const original = Reflect.get(target, property, receiver) as (...args: unknown[]) => unknown;
        return (...args: unknown[]) => {
          const callback = args.at(-1) as (inner: postgres.TransactionSql) => unknown;
          return original.apply(target, [
            ...args.slice(0, -1),
            (inner: postgres.TransactionSql) => callback(preparing(inner)),
          ]);
        };
      }
      return Reflect.get(target, property, receiver);
    },
  });
}
