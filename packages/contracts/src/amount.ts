import { z } from 'zod';

/**
 * Amounts are integers in an asset's minor units, carried as decimal strings so that 18-decimal
 * assets never pass through a float. 78 digits is the size of numeric(78,0), which holds any
 * uint256 an EVM chain can express.
 */
export const AMOUNT_DIGITS_MAX = 78;

const positiveMinor = /^[1-9][0-9]*$/;
/** Zero or a positive integer in minor units: no sign, decimals or leading zeros. */
export const MINOR_UNITS = /^(0|[1-9][0-9]*)$/;

/** An amount that may be zero (a balance, a sum, a limit), as the server reports it. */
export const minorUnitsSchema = z
  .string({ error: 'amounts are strings of digits in minor units' })
  .max(AMOUNT_DIGITS_MAX)
  .regex(MINOR_UNITS, { error: 'minor units: a whole, non-negative number without leading zeros' });

export const amountMinorSchema = z
  .string({ error: 'amountMinor must be a string of digits in minor units' })
  .max(AMOUNT_DIGITS_MAX, { error: `amountMinor has more than ${AMOUNT_DIGITS_MAX} digits` })
  .regex(positiveMinor, {
    error:
      'amountMinor must be a positive integer in minor units, without sign, exponent, decimals or leading zeros',
  });

/** A signed amount, for adjustments that may debit. Same rules, with an optional leading minus. */
export const signedAmountMinorSchema = z
  .string()
  .max(AMOUNT_DIGITS_MAX + 1)
  .regex(/^-?[1-9][0-9]*$/, { error: 'amount must be a non-zero integer in minor units' });

/** Converts minor units to a display string exactly, e.g. ("150000000", 8) -> "1.5". */
export function formatMinor(amountMinor: string, decimals: number): string {
  const negative = amountMinor.startsWith('-');
  const digits = (negative ? amountMinor.slice(1) : amountMinor).replace(/^0+(?=\d)/, '');
  const padded = digits.padStart(decimals + 1, '0');
  const whole = padded.slice(0, padded.length - decimals);
  const fraction = decimals > 0 ? padded.slice(padded.length - decimals).replace(/0+$/, '') : '';
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

/** Parses a display amount ("1.5") into minor units exactly, or returns null when it does not fit. */
export function parseDisplayAmount(display: string, decimals: number): string | null {
  const match = /^(\d+)(?:\.(\d+))?$/.exec(display.trim());
  if (!match) return null;
  const whole = match[1] ?? '0';
  const fraction = match[2] ?? '';
  if (fraction.length > decimals) return null;
  const minor = `${whole}${fraction.padEnd(decimals, '0')}`.replace(/^0+(?=\d)/, '');
  return minor;
}
