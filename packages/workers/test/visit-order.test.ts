/**
 * I16-SCALE: every worker visited the tenants with work in the order the database returned them,
 * so two worker processes worked on the same tenant at the same time and queued on its hot
 * wallet's nonce lock while the other wallets idled: two workers drained a backlog slower than
 * one. Each pass now visits the tenants in a fresh random order.
 */
import { describe, expect, it } from 'vitest';
import * as candidates from '../src/candidates.ts';

describe('I16-SCALE the order a worker visits tenants in', () => {
  const tenants = ['t-a', 't-b', 't-c', 't-d'];
  const visitOrder = (candidates as Record<string, unknown>).visitOrder as
    | (<T>(items: readonly T[], random?: () => number) => T[])
    | undefined;

  it('I16-SCALE is a permutation of the tenants with work, and which one comes first varies between passes', () => {
    expect(visitOrder, 'candidates.ts exports visitOrder').toBeTypeOf('function');
    const firsts = new Set<string>();
    for (let pass = 0; pass < 200; pass += 1) {
      const order = visitOrder?.(tenants) ?? [];
      expect([...order].sort()).toEqual(tenants);
      firsts.add(order[0] as string);
    }
    // Two workers start on the same tenant only by chance (1 in 4 here), not on every pass.
    expect([...firsts].sort()).toEqual(tenants);
  });

  it('I16-SCALE leaves the list it is given untouched', () => {
    expect(visitOrder, 'candidates.ts exports visitOrder').toBeTypeOf('function');
    const given = [...tenants];
    expect(visitOrder?.(given, () => 0)).toHaveLength(4);
    expect(given).toEqual(tenants);
  });
});
