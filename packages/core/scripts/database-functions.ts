import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The database functions' sources: packages/core/sql/<function>.sql holds the function in force,
 * as pg_get_functiondef prints it, under a few `--` lines that say what it is for (sql/README.md).
 * Read here for the migration generator and for the test that compares them with a migrated
 * database.
 */
export const sqlFolder = fileURLToPath(new URL('../sql', import.meta.url));

/** The function names that have a file, sorted. */
export function functionFileNames(): string[] {
  return readdirSync(sqlFolder)
    .filter((file) => file.endsWith('.sql'))
    .map((file) => file.slice(0, -'.sql'.length))
    .sort();
}

/** The file of one function, as written (header comments included). */
export function readFunctionFile(name: string): string {
  return readFileSync(`${sqlFolder}/${name}.sql`, 'utf8');
}

/**
 * A definition without its leading `--` header lines (and blank lines among them), without trailing whitespace on any line
 * or at the end: the only differences between a file and pg_get_functiondef that do not matter.
 */
export function functionBody(definition: string): string {
  const lines = definition.split('\n').map((line) => line.trimEnd());
  const start = lines.findIndex((line) => line !== '' && !line.startsWith('--'));
  return lines
    .slice(start < 0 ? lines.length : start)
    .join('\n')
    .trimEnd();
}
