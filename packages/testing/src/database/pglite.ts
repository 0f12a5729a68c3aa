import { cpSync, existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '@idem/core';
import { migrationsHash } from './template.ts';

/**
 * A new data directory for the embedded database (PGlite) whose `pgdata` is already initialised and
 * migrated: a copy of a template made once per migrations folder under the system's temp directory.
 * Initialising a PGlite data directory takes about 14 s and migrating it 2 s more; copying it, under
 * half a second. The tests that prove the CLI and server set up a blank directory themselves keep
 * starting from an empty one.
 */
export async function migratedPgliteDataDir(prefix = 'idem-pglite-'): Promise<string> {
  const template = await pgliteTemplate();
  const dataDir = mkdtempSync(join(tmpdir(), prefix));
  cpSync(template, join(dataDir, 'pgdata'), { recursive: true });
  return dataDir;
}

let template: Promise<string> | null = null;

function pgliteTemplate(): Promise<string> {
  template ??= makePgliteTemplate();
  return template;
}

async function makePgliteTemplate(): Promise<string> {
  const path = join(tmpdir(), `idem-pglite-template-${await migrationsHash()}`);
  if (existsSync(path)) return path;
  // Made aside and renamed into place: a parallel test process that loses the race keeps the winner's.
  const building = mkdtempSync(join(tmpdir(), 'idem-pglite-template-building-'));
  const handle = await openDatabase({ dataDir: join(building, 'pgdata') });
  try {
    await handle.migrate();
  } finally {
    await handle.close();
  }
  try {
    renameSync(join(building, 'pgdata'), path);
  } catch (error) {
    if (!existsSync(path)) throw error;
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
  return path;
}
