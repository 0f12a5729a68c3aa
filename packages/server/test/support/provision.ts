import { join } from 'node:path';
import { createWebhookEndpoint, type Database, type DatabaseHandle, openDatabase } from '@idem/core';
import { ETH } from '@idem/testing/chain';
import {
  createTestDatabase,
  migratedPgliteDataDir,
  onPostgres,
  type TestDatabase,
} from '@idem/testing/database';

import { evmAddress, uniqueId } from '@idem/testing/tenants';

export { evmAddress, provisionTenant, type TenantFixture, uniqueId } from '@idem/testing/tenants';
export { createWebhookEndpoint, ETH, onPostgres };

/**
 * A withdrawal request of `provisionTenant`'s customer (`cust-7`, funded with 100 ETH): 0.01 ETH
 * to a fresh address under a fresh withdrawal id.
 */
export function withdrawalBody(overrides: Record<string, unknown> = {}) {
  return {
    withdrawalId: uniqueId('wd'),
    accountId: 'cust-7',
    asset: 'ETH',
    destination: evmAddress(),
    amountMinor: (ETH / 100n).toString(),
    ...overrides,
  };
}

/**
 * Where a contract test's server keeps its data. PostgreSQL: a fresh database the test can query
 * while the server runs. PGlite: a data directory, which only one process may open at a time, so
 * the test provisions before starting the server and inspects after stopping it.
 */
export type Backend =
  | { kind: 'postgres'; database: TestDatabase; env: Record<string, string> }
  | { kind: 'pglite'; dataDir: string; env: Record<string, string> };

export const backendKinds: ('pglite' | 'postgres')[] = onPostgres ? ['pglite', 'postgres'] : ['pglite'];

export async function createBackend(kind: 'pglite' | 'postgres'): Promise<Backend> {
  if (kind === 'postgres') {
    const database = await createTestDatabase({ maxConnections: 8 });
    if (!database.url) throw new Error('PostgreSQL backend without a URL');
    return { kind, database, env: { DATABASE_URL: database.url, IDEM_DB_POOL_MAX: '10' } };
  }
  // Already migrated (a copy of a template): the blank directory's set-up is cli.test.ts's to prove.
  const dataDir = await migratedPgliteDataDir('idem-contract-');
  return { kind, dataDir, env: { IDEM_DATA_DIR: dataDir } };
}

/** Runs `work` with direct database access: at once on PostgreSQL, between server runs on PGlite. */
export async function withDirectDatabase<T>(
  backend: Backend,
  work: (db: Database) => Promise<T>,
): Promise<T> {
  if (backend.kind === 'postgres') return work(backend.database.db);
  const handle: DatabaseHandle = await openDatabase({ dataDir: join(backend.dataDir, 'pgdata') });
  try {
    await handle.migrate();
    return await work(handle.db);
  } finally {
    await handle.close();
  }
}

export async function disposeBackend(backend: Backend): Promise<void> {
  if (backend.kind === 'postgres') await backend.database.dispose();
}
