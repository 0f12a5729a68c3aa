import type { Database } from '@idem/core';
import { type ServerProcess, startServerProcess } from '@idem/testing/server';
import { afterAll, beforeAll } from 'vitest';
import { type Backend, createBackend, disposeBackend, withDirectDatabase } from './provision.ts';

export interface Served<T> {
  readonly backend: Backend;
  readonly server: ServerProcess;
  /** What `provision` returned. */
  readonly fixtures: T;
}

/**
 * Registers the hooks of a describe block that talks to the real server: a fresh backend,
 * `provision` run on it before the server starts (PGlite allows one process at a time), the server
 * started with `env`, and everything stopped and removed afterwards. Read the fields in tests.
 */
export function serveForTests<T>(options: {
  kind?: 'pglite' | 'postgres';
  env?: Record<string, string>;
  provision(db: Database): Promise<T>;
}): Served<T> {
  let backend: Backend | undefined;
  let server: ServerProcess | undefined;
  let fixtures: { value: T } | undefined;

  beforeAll(async () => {
    backend = await createBackend(options.kind ?? 'pglite');
    const created = backend;
    fixtures = { value: await withDirectDatabase(created, options.provision) };
    server = await startServerProcess({ ...created.env, ...options.env });
  });
  afterAll(async () => {
    await server?.stop();
    if (backend) await disposeBackend(backend);
  });

  const started = <V>(value: V | undefined): V => {
    if (value === undefined) throw new Error('the server is not started yet (read this inside a test)');
    return value;
  };
  return {
    get backend() {
      return started(backend);
    },
    get server() {
      return started(server);
    },
    get fixtures() {
      return started(fixtures).value;
    },
  };
}
