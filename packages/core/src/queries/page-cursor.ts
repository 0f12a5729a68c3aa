import { IdemError } from '@idem/contracts';

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A timestamp as JavaScript (ISO 8601) or PostgreSQL (`timestamptz::text`) writes it. */
const TIMESTAMP_TEXT = /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?([+-]\d{2}(:?\d{2})?|Z)$/;

/**
 * The opaque cursor of a keyset page: where the last row returned stood, as (time, id). Every
 * paged list (operations, queues, proposals) uses this one codec, so a cursor is checked the same
 * way everywhere before it reaches a query.
 */
export function encodeCursor(at: string, id: string, amountMinor?: string): string {
  const text = amountMinor === undefined ? `${at}|${id}` : `${at}|${id}|${amountMinor}`;
  return Buffer.from(text, 'utf8').toString('base64url');
}

/** A whole number in minor units as numeric(78,0) holds it (an adjustment may be negative). */
const AMOUNT_TEXT = /^-?\d{1,78}$/;

/**
 * The position of the last row: its time and id, and for a page ordered by amount (the staff
 * Withdrawals explorer) its amount first.
 */
export function decodeCursor(cursor: string): { at: string; id: string; amountMinor?: string } {
  const [at, id, amountMinor, ...rest] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  if (
    rest.length > 0 ||
    (amountMinor !== undefined && !AMOUNT_TEXT.test(amountMinor)) ||
    !at ||
    !TIMESTAMP_TEXT.test(at) ||
    Number.isNaN(new Date(at).getTime()) ||
    !id ||
    !UUID_PATTERN.test(id)
  ) {
    throw new IdemError('VALIDATION', 'cursor is not one this API returned', {
      issues: [{ path: 'cursor', message: 'invalid cursor' }],
    });
  }
  return amountMinor === undefined ? { at, id } : { at, id, amountMinor };
}

/** The opaque cursor of a log paged by an increasing sequence number (the delivery log). */
export function encodeSequenceCursor(sequence: bigint): string {
  return Buffer.from(`seq|${sequence}`, 'utf8').toString('base64url');
}

export function decodeSequenceCursor(cursor: string): bigint {
  const match = /^seq\|(\d{1,19})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match?.[1]) {
    throw new IdemError('VALIDATION', 'cursor is not one this API returned', {
      issues: [{ path: 'cursor', message: 'invalid cursor' }],
    });
  }
  return BigInt(match[1]);
}
