/**
 * A seed names a run: the same seed and shape give the same fault schedule and the same client
 * choices, so a failing run can be replayed; another seed gives another schedule.
 */
import { describe, expect, it } from 'vitest';
import { Prng } from '../src/prng.ts';
import { buildSchedule, describeEvent, FAULT_KINDS, faultKindsOf } from '../src/schedule.ts';

const shape = { faultPhaseMs: 60_000, servers: 2, workers: 3 };

describe('seeded schedule', () => {
  it('the same seed gives the same schedule, event for event', () => {
    const first = buildSchedule(new Prng(42).fork('faults'), shape).map(describeEvent);
    const second = buildSchedule(new Prng(42).fork('faults'), shape).map(describeEvent);
    expect(second).toEqual(first);
    expect(first.length).toBeGreaterThan(20);
  });

  it('another seed gives another schedule', () => {
    const a = buildSchedule(new Prng(1).fork('faults'), shape).map(describeEvent);
    const b = buildSchedule(new Prng(2).fork('faults'), shape).map(describeEvent);
    expect(b).not.toEqual(a);
  });

  it('I12-CHAOS every fault kind, and each node mode (429, hang, lag), appears in a 25 s run, whatever the seed', () => {
    for (let seed = 0; seed < 50; seed += 1) {
      const early = buildSchedule(new Prng(seed).fork('faults'), { ...shape, faultPhaseMs: 25_000 }).filter(
        (event) => event.atMs < 23_000,
      );
      expect(new Set(early.map((event) => event.kind)), `seed ${seed}`).toEqual(new Set(faultKindsOf(shape)));
      const nodeModes = early.flatMap((event) => (event.kind === 'node' ? [event.mode] : []));
      expect(new Set(nodeModes), `seed ${seed}`).toEqual(new Set(['429', 'hang', 'lag']));
      expect(FAULT_KINDS).toContain('fee-spike');
    }
  });

  it('I18 with --signer pkcs11 the HSM answering late is among the faults of a 25 s run; with in-process keys it never is', () => {
    const hsm = { ...shape, faultPhaseMs: 25_000, signer: 'pkcs11' as const };
    for (let seed = 0; seed < 50; seed += 1) {
      const early = buildSchedule(new Prng(seed).fork('faults'), hsm).filter((event) => event.atMs < 23_000);
      expect(new Set(early.map((event) => event.kind)), `seed ${seed}`).toEqual(new Set(faultKindsOf(hsm)));
      expect(early.some((event) => event.kind === 'kill-signer')).toBe(false);
      for (const event of early)
        if (event.kind === 'signer-timeout') expect(event.holdMs).toBeGreaterThan(1_000);
      const local = buildSchedule(new Prng(seed).fork('faults'), shape);
      expect(local.some((event) => event.kind === 'signer-timeout')).toBe(false);
    }
  });

  it('I32-SIGNER with --signer service the signer service is killed (and answers late) in a run; never without it', () => {
    const service = { ...shape, faultPhaseMs: 40_000, signer: 'service' as const };
    for (let seed = 0; seed < 50; seed += 1) {
      const kinds = new Set(buildSchedule(new Prng(seed).fork('faults'), service).map((event) => event.kind));
      expect(kinds, `seed ${seed}`).toEqual(new Set(FAULT_KINDS));
      const hsm = buildSchedule(new Prng(seed).fork('faults'), { ...service, signer: 'pkcs11' });
      expect(hsm.some((event) => event.kind === 'kill-signer')).toBe(false);
    }
  });

  it('I12-CHAOS fee spikes exceed any fee signed before them; lagging views are on reads only', () => {
    for (let seed = 0; seed < 50; seed += 1)
      for (const event of buildSchedule(new Prng(seed).fork('faults'), shape)) {
        // Today's fixed cap is 100 gwei; a spike must be above it to leave anything unminable.
        if (event.kind === 'fee-spike') expect(event.baseFeeGwei).toBeGreaterThan(100);
        if (event.kind === 'node' && event.mode === 'lag') expect(event.methods).toBe('reads');
      }
  });

  it('targets stay within the process counts', () => {
    for (let seed = 0; seed < 50; seed += 1)
      for (const event of buildSchedule(new Prng(seed).fork('faults'), shape)) {
        if (event.kind === 'kill-server') expect(event.target).toBeLessThan(shape.servers);
        if (event.kind === 'kill-worker') expect(event.target).toBeLessThan(shape.workers);
      }
  });

  it('forked streams are independent of each other and reproducible', () => {
    const root = new Prng(7);
    const a1 = root.fork('client-0');
    const b = root.fork('client-1');
    const a2 = new Prng(7).fork('client-0');
    const sequence = (p: Prng) => Array.from({ length: 8 }, () => p.nextUint32());
    const fromA1 = sequence(a1);
    expect(sequence(a2)).toEqual(fromA1);
    expect(sequence(b)).not.toEqual(fromA1);
  });
});
