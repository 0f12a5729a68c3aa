import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { type BatchingOptions, type DatabaseHandle, openDatabase } from '@idem/core';
import type { Env } from './env.ts';

/**
 * Opens the database the environment names: PostgreSQL with DATABASE_URL, otherwise the embedded
 * PGlite database in IDEM_DATA_DIR. PGlite allows one process per data directory, so the embedded
 * mode takes a lock file; the CLI refuses to open a directory a running server holds.
 */
export async function openConfiguredDatabase(
  env: Env,
  options: { purpose: 'server' | 'cli' },
): Promise<DatabaseHandle & { migrateAsOwner(): Promise<void> }> {
  if (env.DATABASE_URL) {
    const handle = await openDatabase({
      url: env.DATABASE_URL,
      maxConnections: env.IDEM_DB_POOL_MAX,
      batching: batchingFromEnv(env),
    });
    const ownerUrl = env.MIGRATION_DATABASE_URL;
    return {
      ...handle,
      // Migrations run as the owner role; the app's own login role may not be able to run DDL.
      migrateAsOwner: async () => {
        if (!ownerUrl || ownerUrl === env.DATABASE_URL) return handle.migrate();
        const owner = await openDatabase({ url: ownerUrl, maxConnections: 1 });
        try {
          await owner.migrate();
        } finally {
          await owner.close();
        }
      },
    };
  }
  mkdirSync(env.IDEM_DATA_DIR, { recursive: true });
  const release = takeLock(env.IDEM_DATA_DIR, options.purpose);
  // A CLI command lives a second or two: optimising PGlite's WebAssembly in the background would
  // cost more CPU than the command (baseline code only: a command 1.4 s to 0.9 s, half the CPU).
  if (options.purpose === 'cli') setFlagsFromString('--liftoff-only');
  try {
    const handle = await openDatabase({
      dataDir: join(env.IDEM_DATA_DIR, 'pgdata'),
      batching: batchingFromEnv(env),
    });
    return {
      ...handle,
      migrateAsOwner: () => handle.migrate(),
      close: async () => {
        try {
          await handle.close();
        } finally {
          release();
        }
      },
    };
  } catch (error) {
    release();
    throw error;
  }
}

/**
 * The submission batching the environment asks for (IDEM_BATCHING and IDEM_BATCH_*). Without
 * IDEM_BATCH_CONCURRENCY, openDatabase takes DEFAULT_BATCHING's (one batch of a tenant in flight).
 */
export function batchingFromEnv(env: Env): Partial<BatchingOptions> | false {
  if (env.IDEM_BATCHING === 'off') return false;
  return {
    maxItems: env.IDEM_BATCH_MAX_ITEMS,
    maxWaitMs: env.IDEM_BATCH_MAX_WAIT_MS,
    gatherFrom: env.IDEM_BATCH_GATHER_FROM,
    ...(env.IDEM_BATCH_CONCURRENCY === undefined ? {} : { concurrency: env.IDEM_BATCH_CONCURRENCY }),
  };
}

function takeLock(dataDir: string, purpose: string): () => void {
  const path = join(dataDir, 'lock');
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, JSON.stringify({ pid: process.pid, purpose }));
      closeSync(fd);
      return () => rmSync(path, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = readHolder(path);
      if (holder && isAlive(holder.pid)) {
        throw new Error(
          `the embedded database in ${dataDir} is in use by ${holder.purpose} (pid ${holder.pid}); ` +
            'stop it first, or set DATABASE_URL to use PostgreSQL',
        );
      }
      rmSync(path, { force: true }); // A stale lock from a process that died.
    }
  }
  throw new Error(`could not lock ${path}`);
}

function readHolder(path: string): { pid: number; purpose: string } | null {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as { pid: number; purpose: string };
  } catch {
    return null;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
