import { describe, expect, it } from 'vitest';
import {
  amountMinorSchema,
  formatMinor,
  idempotencyKeySchema,
  isValidDestination,
  parseDisplayAmount,
  withdrawalKey,
} from '../src/index.ts';

describe('amounts in minor units', () => {
  it('accepts positive integer strings up to 78 digits and nothing else', () => {
    for (const ok of ['1', '1500000000000000000', '9'.repeat(78)])
      expect(amountMinorSchema.safeParse(ok).success).toBe(true);
    for (const bad of ['0', '-1', '1.5', '1e18', '0100', ' 1', '9'.repeat(79), 1, 1n]) {
      expect(amountMinorSchema.safeParse(bad).success).toBe(false);
    }
  });

  it('converts between minor units and display units exactly, without floats', () => {
    expect(formatMinor('150000000', 8)).toBe('1.5');
    expect(formatMinor('1', 18)).toBe('0.000000000000000001');
    expect(formatMinor('123456789012345678901234567890', 18)).toBe('123456789012.34567890123456789');
    expect(formatMinor('5', 0)).toBe('5');
    expect(parseDisplayAmount('1.5', 8)).toBe('150000000');
    expect(parseDisplayAmount('0.000000000000000001', 18)).toBe('1');
    expect(parseDisplayAmount('1.123', 2)).toBeNull();
    expect(parseDisplayAmount('1e3', 2)).toBeNull();
    expect(parseDisplayAmount('-1', 2)).toBeNull();
  });
});

describe('keys', () => {
  it('C23 refuses keys that are empty, too long, spaced, or look like an e-mail address', () => {
    for (const bad of ['', 'x'.repeat(256), 'a b', 'alice@example.com'])
      expect(idempotencyKeySchema.safeParse(bad).success).toBe(false);
    expect(idempotencyKeySchema.safeParse('withdrawal-42').success).toBe(true);
  });

  it('derives the stable withdrawal key from the integrator id', () => {
    expect(withdrawalKey('42')).toBe('withdrawal-42');
  });
});

describe('destinations', () => {
  it('checks EVM addresses with their EIP-55 checksum and bitcoin addresses by their own rules', () => {
    expect(isValidDestination('ethereum', '0x52908400098527886E0F7030069857D2E4169EE7')).toBe(true);
    expect(isValidDestination('ethereum', '0x52908400098527886E0F7030069857D2E4169Ee7')).toBe(false);
    // EIP-55: an all-lowercase address carries no checksum and is valid; mixed case must match it.
    expect(isValidDestination('ethereum', '0x52908400098527886e0f7030069857d2e4169ee7')).toBe(true);
    expect(isValidDestination('ethereum', '0x5290840009852788')).toBe(false);
    expect(isValidDestination('bitcoin', 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq')).toBe(true);
    expect(isValidDestination('bitcoin', '0x52908400098527886E0F7030069857D2E4169EE7')).toBe(false);
  });
});
