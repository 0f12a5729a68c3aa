import { getTableColumns } from 'drizzle-orm';
import { operations } from '../db/schema/index.ts';
import type { Operation } from './operation-record.ts';

const columns = Object.entries(getTableColumns(operations));

/**
 * Maps a raw `operations` row (from a function returning SETOF operations) to the typed record,
 * with the same per-column conversions the query builder applies.
 */
export function operationFromRow(raw: Record<string, unknown>): Operation {
  const record: Record<string, unknown> = {};
  for (const [property, column] of columns) {
    const value = raw[column.name];
    record[property] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
  }
  return record as Operation;
}
