/**
 * `execute` returns an array on postgres.js and `{ rows }` on PGlite; this reads both. Used only for
 * the few statements the query builder cannot express.
 */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  const rows = (result as { rows?: unknown }).rows;
  return Array.isArray(rows) ? (rows as T[]) : [];
}
