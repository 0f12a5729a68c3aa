import { describe, expect, it } from 'vitest';
import {
  assetCodeSchema,
  cursorSchema,
  payloadHashSchema,
  primaryColorSchema,
  referenceSchema,
} from '../src/index.ts';

/**
 * The patterns every package imports from contracts instead of restating (asset codes, cursors,
 * payload hashes, references, brand colours): each accepts exactly what it did when it was written
 * out in each place.
 */
const accepts = (schema: { safeParse: (value: unknown) => { success: boolean } }, value: unknown) =>
  schema.safeParse(value).success;

describe('shared schemas', () => {
  it('an asset code is 2 to 12 upper-case letters and digits', () => {
    for (const ok of ['ETH', 'USDC', 'A1', 'X'.repeat(12)]) expect(accepts(assetCodeSchema, ok)).toBe(true);
    for (const bad of ['E', 'eth', 'X'.repeat(13), 'US-D', ' ETH', ''])
      expect(accepts(assetCodeSchema, bad)).toBe(false);
  });

  it('a cursor is 1 to 200 characters', () => {
    expect(accepts(cursorSchema, 'x')).toBe(true);
    expect(accepts(cursorSchema, 'x'.repeat(200))).toBe(true);
    expect(accepts(cursorSchema, '')).toBe(false);
    expect(accepts(cursorSchema, 'x'.repeat(201))).toBe(false);
  });

  it('a payload hash is 64 lower-case hex digits', () => {
    expect(accepts(payloadHashSchema, 'a'.repeat(64))).toBe(true);
    for (const bad of ['A'.repeat(64), 'a'.repeat(63), 'a'.repeat(65), `0x${'a'.repeat(62)}`])
      expect(accepts(payloadHashSchema, bad)).toBe(false);
  });

  it('a reference and a brand colour, as the web screens check them before sending', () => {
    expect(accepts(referenceSchema, 'acct-1.a_b:c')).toBe(true);
    for (const bad of ['', 'a b', 'x'.repeat(129), 'é']) expect(accepts(referenceSchema, bad)).toBe(false);
    expect(accepts(primaryColorSchema, '#1c7ed6')).toBe(true);
    for (const bad of ['1c7ed6', '#1c7ed', '#1c7ed6a', '#GGGGGG'])
      expect(accepts(primaryColorSchema, bad)).toBe(false);
  });
});
