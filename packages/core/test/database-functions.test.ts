import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionBody, functionFileNames, readFunctionFile } from '../scripts/database-functions.ts';
import { rowsOf } from '../src/db/rows.ts';

/**
 * Each database function has one readable source, packages/core/sql/<function>.sql (sql/README.md).
 * This proves the files are the functions in force: it migrates a fresh database, reads every
 * function of schema public back with pg_get_functiondef, and compares it with its file, ignoring
 * only the file's header comments and trailing whitespace. A function without a file, or a file
 * without a function, fails too.
 */
let t: TestDatabase;
let inForce: Map<string, string>;

const files = functionFileNames();

beforeAll(async () => {
  t = await createTestDatabase();
  const rows = rowsOf<{ name: string; definition: string }>(
    await t.db.execute(sql`
      select p.proname as name, pg_get_functiondef(p.oid) as definition
        from pg_proc p
       where p.pronamespace = 'public'::regnamespace and p.prokind in ('f', 'p')
         and not exists (select 1 from pg_depend d where d.objid = p.oid and d.deptype = 'e')
       order by p.proname`),
  );
  inForce = new Map();
  for (const { name, definition } of rows) {
    // One file per name: an overload would need a second file the rule has no name for.
    expect(inForce.has(name), `${name} is overloaded`).toBe(false);
    inForce.set(name, definition);
  }
});
afterAll(() => t.dispose());

describe('the files under packages/core/sql are the database functions in force', () => {
  it('every function in schema public has a file, and every file a function', () => {
    expect(inForce.size).toBeGreaterThan(30);
    const withoutFile = [...inForce.keys()].filter((name) => !files.includes(name));
    const withoutFunction = files.filter((name) => !inForce.has(name));
    expect({ withoutFile, withoutFunction }).toEqual({ withoutFile: [], withoutFunction: [] });
  });

  it.each(files)('%s.sql is the body in force', (name) => {
    const definition = inForce.get(name);
    expect(definition, `no function ${name} after migrating`).toBeDefined();
    // A difference: the file was edited without `pnpm --filter @idem/core db:function <name>`, or a
    // migration restated the function without its file (sql/README.md).
    expect(functionBody(readFunctionFile(name)), `packages/core/sql/${name}.sql`).toBe(
      functionBody(definition ?? ''),
    );
  });
});
