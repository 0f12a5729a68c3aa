import { rowsOf } from '@idem/core';
import { type ServerProcess, startServerProcess } from '@idem/testing/server';
import { sql } from 'drizzle-orm';
import { type PgProxy, startPgProxy } from './pg-proxy.ts';
import {
  type Backend,
  createBackend,
  disposeBackend,
  provisionTenant,
  type TenantFixture,
} from './provision.ts';

/**
 * A real server whose PostgreSQL sits behind a TCP proxy the test can cut, or make lose one reply
 * (I16-UNAVAILABLE, I17): what an integrator sees while the database is out of reach.
 */
export interface ProxiedServer {
  backend: Extract<Backend, { kind: 'postgres' }>;
  proxy: PgProxy;
  server: ServerProcess;
  tenant: TenantFixture;
  /** The operations stored under a key, read directly (not through the proxy). */
  operationsWithKey(key: string): Promise<{ operation_id: string }[]>;
  stop(): Promise<void>;
}

export async function startProxiedServer(): Promise<ProxiedServer> {
  const backend = (await createBackend('postgres')) as Extract<Backend, { kind: 'postgres' }>;
  const tenant = await provisionTenant(backend.database.db);
  const url = new URL(backend.database.url ?? '');
  const proxy = await startPgProxy(Number(url.port || 5432), url.hostname);
  url.host = `127.0.0.1:${proxy.port}`;
  const server = await startServerProcess({
    ...backend.env,
    DATABASE_URL: url.toString(),
    IDEM_RATE_LIMIT_PER_SECOND: '10000',
    // The tests warm the API key so that only the write meets the cut database; with the default
    // 5 s cache a loaded machine let it expire, and the whole call was 503 at authentication.
    IDEM_API_KEY_CACHE_MS: '60000',
  });
  return {
    backend,
    proxy,
    server,
    tenant,
    operationsWithKey: async (key) =>
      rowsOf<{ operation_id: string }>(
        await backend.database.db.execute(
          sql`select operation_id from operations where tenant_id = ${tenant.tenantId}::uuid and idempotency_key = ${key}`,
        ),
      ),
    stop: async () => {
      await server.stop();
      await proxy.close();
      await disposeBackend(backend);
    },
  };
}
